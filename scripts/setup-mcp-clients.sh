#!/usr/bin/env bash
# Installs the MCP clients the `jtap mcp` tests drive it with (crates/cli/tests/mcp.rs),
# under .cache/ (git-ignored, reused when present):
# - the Python `mcp` SDK, into a virtual environment in .cache/python;
# - the MCP Inspector's CLI (npm `@modelcontextprotocol/inspector`) into .cache/mcp-inspector,
#   when node and npm are on the machine (the tests that need it say when they are skipped).
# Idempotent; safe to run on every test run.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.cache/python
MCP_VERSION=1.26.0
INSPECTOR=.cache/mcp-inspector
INSPECTOR_VERSION=2.12.0

if ! { [[ -x "$VENV/bin/python" ]] && "$VENV/bin/python" -c "import mcp" 2>/dev/null; }; then
    echo "setup-mcp-clients: installing mcp==$MCP_VERSION into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION"
fi

if [[ ! -x "$INSPECTOR/node_modules/.bin/mcp-inspector" ]]; then
    if command -v npm >/dev/null && command -v node >/dev/null; then
        echo "setup-mcp-clients: installing @modelcontextprotocol/inspector@$INSPECTOR_VERSION into $INSPECTOR"
        npm install --silent --no-audit --no-fund --prefix "$INSPECTOR" \
            "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >/dev/null
    else
        echo "setup-mcp-clients: no node/npm: the MCP Inspector tests will be skipped" >&2
    fi
fi
