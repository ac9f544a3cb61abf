"""One MCP session with `jtap mcp`, driven by the Python `mcp` SDK's client.

Usage: session.py JTAP_BINARY CALLS_JSON [SERVER_ARG...]

CALLS_JSON is a list of [tool, arguments] pairs. Prints one JSON object: the server's
name, the listed tools with their input schemas, and for each call its text and whether
the server answered it as an error. The `jtap mcp` tests (crates/cli/tests/mcp.rs) assert on it.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def session(jtap, calls, server_args):
    # The whole environment, TMPDIR included (where the profile tool writes).
    server = StdioServerParameters(command=jtap, args=["mcp", *server_args], env=dict(os.environ))
    async with stdio_client(server) as (read, write):
        async with ClientSession(read, write) as client:
            init = await client.initialize()
            tools = (await client.list_tools()).tools
            results = []
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                text = "\n".join(c.text for c in result.content if c.type == "text")
                results.append({"tool": name, "is_error": bool(result.isError), "text": text})
            return {
                "server": init.serverInfo.name,
                "tools": {t.name: t.inputSchema for t in tools},
                "results": results,
            }


def main():
    jtap, calls = sys.argv[1], json.loads(sys.argv[2])
    print(json.dumps(asyncio.run(session(jtap, calls, sys.argv[3:]))))


if __name__ == "__main__":
    main()
