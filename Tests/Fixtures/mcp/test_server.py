# SPDX-License-Identifier: Apache-2.0
"""An MCP server over stdio for AFMAgent's tests, written with PyPI's `mcp` package (pinned in
Tests/clients/requirements.txt).

    test_server.py           serves the tools below
    test_server.py silent    reads its input and never answers (initialize times out)
"""
import os
import sys

if len(sys.argv) > 1 and sys.argv[1] == "silent":
    for _ in sys.stdin:
        pass
    sys.exit(0)

from mcp.server import MCPServer

server = MCPServer("afm-test-server", instructions="Tools for AFM's tests.")


@server.tool()
def add(a: int, b: int) -> str:
    """Adds two integers."""
    return str(a + b)


@server.tool()
def refuse(reason: str) -> str:
    """Always fails with the reason (an isError result)."""
    raise ValueError(f"refused: {reason}")


@server.tool()
def crash() -> str:
    """Exits the server in the middle of the call."""
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


if __name__ == "__main__":
    server.run()
