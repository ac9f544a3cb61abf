#!/usr/bin/env bash
# The whole test suite: installs what the tests need (Debian packages, JDK 11/21 runtimes,
# cached under .cache/), then runs every crate's unit and integration tests against the JDK
# matrix (11, 17, 21, 25; an absent JDK is skipped with a printed reason).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-system.sh
scripts/setup-jdks.sh
cargo build --workspace --all-targets
exec cargo test --workspace --no-fail-fast "$@"
