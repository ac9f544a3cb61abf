#!/usr/bin/env bash
# Installs PyPI's opentelemetry-proto (the official generated Python modules of the OTLP
# profiles signal, with protobuf) into .cache/otlp-python (git-ignored, reused when present),
# for scripts/check-otlp.py, which the OTLP tests (crates/cli/tests/otlp.rs) decode jtap's
# `-o profile.otlp` with. Pinned: the profiles signal is in development and its messages
# change between releases. Idempotent; safe to run on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=1.45.2
DEST=.cache/otlp-python
if [[ -f $DEST/.version ]] && [[ $(cat "$DEST/.version") == "$VERSION" ]]; then
    exit 0
fi
echo "setup-otlp: installing opentelemetry-proto==$VERSION into $DEST"
rm -rf "$DEST"
# --target installs beside the system's packages, not into them (no venv module needed).
if ! python3 -m pip install --quiet --disable-pip-version-check --target "$DEST" \
        "opentelemetry-proto==$VERSION" 2>"${TMPDIR:-/tmp}/setup-otlp.err"; then
    echo "setup-otlp: could not install opentelemetry-proto: $(tail -1 "${TMPDIR:-/tmp}/setup-otlp.err")" >&2
    rm -rf "$DEST"
    exit 0
fi
echo "$VERSION" >"$DEST/.version"
