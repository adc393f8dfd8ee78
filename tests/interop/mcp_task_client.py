#!/usr/bin/env python3
"""The MCP Python SDK 1.x's experimental task client (`session.experimental`), for
tests/mcp_tasks.rs: connects to --url over --transport http or sse, calls --tool as a task, polls it
until it ends, fetches its result and lists the tasks; prints one JSON line per step."""

import argparse
import json

import anyio
from mcp import ClientSession, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamablehttp_client


def emit(obj):
    print(json.dumps(obj), flush=True)


async def run(args):
    if args.transport == "http":
        transport = streamablehttp_client(args.url)
    else:
        transport = sse_client(args.url)
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            emit({"op": "connect", "capabilities": init.capabilities.model_dump(mode="json", exclude_none=True)})
            tools = await session.list_tools()
            emit({"op": "list_tools", "tools": [t.model_dump(mode="json", exclude_none=True) for t in tools.tools]})
            created = await session.experimental.call_tool_as_task(args.tool, {"n": 1}, ttl=60000)
            emit({"op": "created", "task": created.task.model_dump(mode="json", exclude_none=True)})
            statuses = []
            async for status in session.experimental.poll_task(created.task.taskId):
                statuses.append(status.status)
            emit({"op": "polled", "statuses": statuses})
            result = await session.experimental.get_task_result(created.task.taskId, types.CallToolResult)
            emit({"op": "result", "result": result.model_dump(mode="json", by_alias=True, exclude_none=True)})
            listed = await session.experimental.list_tasks()
            emit({"op": "list", "ids": [t.taskId for t in listed.tasks]})


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--transport", choices=["http", "sse"], default="http")
    p.add_argument("--tool", required=True)
    anyio.run(run, p.parse_args())


if __name__ == "__main__":
    main()
