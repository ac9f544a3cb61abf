#!/usr/bin/env bash
# The whole test suite: installs what the tests need (Debian packages, JDK 11/21 runtimes,
# cached under .cache/), then runs every crate's unit and integration tests against the JDK
# matrix (11, 17, 21, 25; an absent JDK is skipped with a printed reason). Ends with one
# summary line over all test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-system.sh
scripts/setup-jdks.sh
scripts/machine-facts.sh
# Benchmarks and examples are not run here, but they must keep compiling.
cargo check --workspace --benches --examples --quiet
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --lib --bins --tests --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit $status
