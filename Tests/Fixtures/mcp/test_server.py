# SPDX-License-Identifier: Apache-2.0
"""An MCP server over stdio for AFMAgent's tests, written with PyPI's `mcp` package (pinned in
Tests/clients/requirements.txt).

    test_server.py           serves the tools below
    test_server.py silent    reads its input and never answers (initialize times out)
    test_server.py stubborn  serves, but ignores SIGTERM and keeps running after its input closes
    test_server.py paged     a low-level server listing tools t0…t4 two per page (nextCursor)
    test_server.py deaf      answers initialize and tools/list (plain JSON-RPC lines), then never reads again
"""
import os
import signal
import sys
import time

if len(sys.argv) > 1 and sys.argv[1] == "silent":
    for _ in sys.stdin:
        pass
    sys.exit(0)

if len(sys.argv) > 1 and sys.argv[1] == "deaf":
    import json

    def answer(message, result):
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)

    for line in sys.stdin:
        message = json.loads(line)
        if message.get("method") == "initialize":
            answer(message, {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                             "serverInfo": {"name": "afm-deaf-server", "version": "1"}})
        elif message.get("method") == "tools/list":
            answer(message, {"tools": [{"name": "echo", "description": "Never answered.",
                                        "inputSchema": {"type": "object"}}]})
            break
    while True:  # its input fills up and the client's writer blocks
        time.sleep(1)

if len(sys.argv) > 1 and sys.argv[1] == "paged":
    import anyio
    import mcp_types as types
    from mcp.server import Server
    from mcp.server.stdio import stdio_server

    names = [f"t{index}" for index in range(5)]

    async def list_tools(ctx, params):
        start = int(params.cursor) if params is not None and params.cursor else 0
        page = [
            types.Tool(name=name, description=f"Tool {name}.", input_schema={"type": "object", "properties": {}})
            for name in names[start:start + 2]
        ]
        following = str(start + 2) if start + 2 < len(names) else None
        return types.ListToolsResult(tools=page, next_cursor=following)

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])

    paged = Server("afm-paged-server", on_list_tools=list_tools, on_call_tool=call_tool)

    async def main():
        async with stdio_server() as (read_stream, write_stream):
            await paged.run(read_stream, write_stream, paged.create_initialization_options())

    anyio.run(main)
    sys.exit(0)

from mcp.server import MCPServer
from mcp.server.mcpserver import Context

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


def multiply(a: int, b: int) -> str:
    """Multiplies two integers."""
    return str(a * b)


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the multiply tool and tells the client its tool list changed."""
    server.add_tool(multiply)
    await ctx.session.send_tool_list_changed()
    return "multiply added"


if __name__ == "__main__":
    stubborn = len(sys.argv) > 1 and sys.argv[1] == "stubborn"
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server.run()
    while stubborn:
        time.sleep(1)
