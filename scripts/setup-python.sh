#!/usr/bin/env bash
# Installs the Python packages the tests drive jtap with into a virtual environment under
# .cache/python (git-ignored, reused when present): the `mcp` SDK, whose client the
# `jtap mcp` tests use. Idempotent; safe to run on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/python
MCP_VERSION=1.26.0

if [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import mcp" 2>/dev/null; then
    exit 0
fi
echo "setup-python: installing mcp==$MCP_VERSION into $VENV"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
