"""A third-party MCP server built with the official Python SDK (mcp 2.x), for `mcpdev --url` tests.

Usage: python_mcp_server.py http|sse
Prints `ready <port>` once it listens on 127.0.0.1, then serves until killed.
"""

import asyncio
import sys

import uvicorn
from mcp.server.mcpserver import MCPServer

server = MCPServer("third-party-python-server")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def lookup_zip(zip: str) -> str:
    """Echo a ZIP code exactly as received (a string, leading zeros and all)."""
    return f"zip={zip!r} type={type(zip).__name__}"


@server.tool()
def explode() -> str:
    """Always fails."""
    raise ValueError("kaboom from python")


async def main() -> None:
    transport = sys.argv[1]
    app = server.streamable_http_app() if transport == "http" else server.sse_app()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    serving = asyncio.create_task(web.serve())
    while not web.started:
        if serving.done():
            serving.result()
        await asyncio.sleep(0.01)
    port = web.servers[0].sockets[0].getsockname()[1]
    print(f"ready {port}", flush=True)
    await serving


if __name__ == "__main__":
    asyncio.run(main())
