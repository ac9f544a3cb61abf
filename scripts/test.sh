#!/usr/bin/env bash
# The whole test suite: installs what the tests need (Debian packages, JDK 11/21 runtimes,
# cached under .cache/), checks formatting, lints and docs, then runs every crate's unit and
# integration tests against the JDK matrix (11, 17, 21, 25; an absent JDK is skipped with a
# printed reason, or fails the run when CI is set). Ends with one summary line over all test
# binaries and the line of JDKs the tests ran on.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-system.sh
scripts/setup-jdks.sh
scripts/setup-otlp.sh
scripts/setup-mcp-clients.sh
scripts/machine-facts.sh

# Lint gates, fail fast: they take about a minute, the tests many, and a run that would fail
# on a formatting slip anyway should say so before the slow part. clippy --all-targets also
# keeps the benchmarks and examples (which are not run here) compiling.
for component in rustfmt clippy; do
    cargo "${component/rustfmt/fmt}" --version >/dev/null 2>&1 || rustup component add "$component"
done
echo "lint: cargo fmt --check"
cargo fmt --all --check
echo "lint: cargo clippy -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "lint: cargo doc -D warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --quiet
echo "lint: the release agent's signal handler cannot panic, allocate or lock"
scripts/check-handler.py

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -f target/jdk-matrix.txt # written afresh by the first test that asks for the JDK matrix
status=0
cargo test --workspace --lib --bins --tests --no-fail-fast "$@" 2>&1 | tee "$log" || status=$?
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
if [[ -f target/jdk-matrix.txt ]]; then
    # Lines are "<version> <home>" or "<version> absent".
    awk '{ v = $1; sub(/^[^ ]+ /, ""); printf "%s%s (%s)", (NR > 1 ? " " : "JDKs: "), v, $0 } END { print "" }' target/jdk-matrix.txt
else
    echo "JDKs: none (no test asked for the JDK matrix)"
fi
exit $status
