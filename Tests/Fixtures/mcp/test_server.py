# SPDX-License-Identifier: Apache-2.0
"""An MCP server over stdio for AFMAgent's tests, written with PyPI's `mcp` package (pinned in
Tests/clients/requirements.txt).

    test_server.py           serves the tools below
    test_server.py silent    reads its input and never answers (initialize times out)
    test_server.py stubborn  serves, but ignores SIGTERM and keeps running after its input closes
    test_server.py paged     a low-level server listing tools t0…t4 two per page (nextCursor)
    test_server.py deaf      answers initialize and tools/list (plain JSON-RPC lines), then never reads again
    test_server.py lingers   serves, keeps running after its input closes, but ends on SIGTERM
    test_server.py version V answers initialize with protocol revision V whatever the client asked (plain
                             JSON-RPC lines), then lists one tool, `add`
    test_server.py leaves M  answers initialize and lists one tool, `go` (plain JSON-RPC lines); calling it
                             with M=orphan starts `sleep 30` with this server's stderr, writes a last line to
                             stderr and exits 3; with M=closes closes its stdout and sleeps 30 s
    test_server.py extras    serves picture (text and a PNG image), whereami (its cwd and AFM_MCP_TEST_VALUE),
                             sleep (seconds; notes when the client cancels it) and received (every message the
                             server read so far: its method, id and params.requestId), so that tests can see what
                             the client sent, including notifications the SDK handles silently
"""
import json
import os
import signal
import sys
import time


def answer(message, result):
    """Writes a JSON-RPC result line (the modes that speak plain JSON-RPC, without the SDK)."""
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)


if len(sys.argv) > 1 and sys.argv[1] == "silent":
    for _ in sys.stdin:
        pass
    sys.exit(0)

if len(sys.argv) > 1 and sys.argv[1] == "deaf":
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

if len(sys.argv) > 2 and sys.argv[1] == "version":
    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            answer(message, {"protocolVersion": sys.argv[2], "capabilities": {"tools": {}},
                             "serverInfo": {"name": "afm-version-server", "version": "1"}})
        elif method == "tools/list":
            answer(message, {"tools": [{"name": "add", "description": "Adds.", "inputSchema": {
                "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}]})
        elif method == "tools/call":
            arguments = message["params"]["arguments"]
            answer(message, {"content": [{"type": "text", "text": str(arguments["a"] + arguments["b"])}]})
    sys.exit(0)

if len(sys.argv) > 2 and sys.argv[1] == "leaves":
    import subprocess

    for line in sys.stdin:
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            answer(message, {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                             "serverInfo": {"name": "afm-leaving-server", "version": "1"}})
        elif method == "tools/list":
            answer(message, {"tools": [{"name": "go", "description": "Leaves.", "inputSchema": {"type": "object"}}]})
        elif method == "tools/call" and sys.argv[2] == "orphan":
            # A child that outlives the server and keeps its stderr open (stdout and stdin not).
            subprocess.Popen(["sleep", "30"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
            print("leaving a child behind", file=sys.stderr, flush=True)
            os._exit(3)
        elif method == "tools/call":
            os.close(1)
            time.sleep(30)
            sys.exit(0)
    sys.exit(0)

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

if len(sys.argv) > 1 and sys.argv[1] == "extras":
    import struct
    import threading
    import zlib

    import anyio
    from mcp.server.mcpserver import Image

    # Every line the client writes passes through a pipe that this thread fills, noting each message first: the
    # SDK reads the pipe as its standard input and never shows a client's notifications to the tools.
    seen = []
    wire = os.dup(0)
    pipe_read, pipe_write = os.pipe()
    os.dup2(pipe_read, 0)
    os.close(pipe_read)

    def copy_input():
        with os.fdopen(wire, "rb") as source, os.fdopen(pipe_write, "wb", buffering=0) as sink:
            for line in source:
                try:
                    message = json.loads(line)
                    seen.append({"method": message.get("method"), "id": message.get("id"),
                                 "requestId": (message.get("params") or {}).get("requestId")})
                except ValueError:
                    seen.append({"unparsed": line.decode(errors="replace")})
                sink.write(line)

    threading.Thread(target=copy_input, daemon=True).start()

    def png(width, height, rgb):
        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
        header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
        return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")

    extras = MCPServer("afm-extras-server")
    cancellations = []

    @extras.tool()
    def picture() -> list:
        """A red square: a text part and a 4x4 PNG image part."""
        return ["a red square", Image(data=png(4, 4, (255, 0, 0)), format="png")]

    @extras.tool()
    def whereami() -> str:
        """The server's working directory and its AFM_MCP_TEST_VALUE variable, as JSON."""
        return json.dumps({"cwd": os.getcwd(), "value": os.environ.get("AFM_MCP_TEST_VALUE")})

    @extras.tool()
    async def sleep(seconds: float) -> str:
        """Sleeps, then says so."""
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            cancellations.append(seconds)
            raise
        return f"slept {seconds}"

    @extras.tool()
    def received() -> str:
        """Every message read so far (method, id, params.requestId) and the sleeps the client cancelled, as JSON."""
        return json.dumps({"messages": seen, "cancelled_sleeps": cancellations})

    extras.run()
    sys.exit(0)

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
    stubborn = len(sys.argv) > 1 and sys.argv[1] in ("stubborn", "lingers")
    if stubborn and sys.argv[1] == "stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    server.run()
    while stubborn:
        time.sleep(1)
