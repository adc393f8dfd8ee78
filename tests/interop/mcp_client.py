#!/usr/bin/env python3
"""An MCP host built on the official Python SDK (`mcp`, 1.x or 2.x), for tests/interop_mcp_sdk.rs.

Connects to --url over --transport http (Streamable HTTP) or sse (legacy HTTP+SSE) the way each SDK
major does it by default (2.x: `Client`, which probes `server/discover` first unless --mode legacy;
1.x: `streamablehttp_client` / `sse_client` + `ClientSession.initialize`), then runs commands and
prints exactly one JSON line per step on stdout:

  {"op":"connect", "sdk":"2.3.0", "protocolVersion":..., "serverInfo":{...}, "capabilities":{...}}
  {"op":"list_tools", "pages":[[names of page 1], ...], "cursors":[cursors sent after page 1]}
  {"op":"call", "name":..., "result":{"content":[...], "isError":...}} or {..., "error":{"code":..., "message":...}}
  {"op":"read", "uri":..., "contents":[...]}
  {"op":"subscribe", "uri":..., "via":"resources/subscribe" | "subscriptions/listen"}
  {"op":"listen_tools", "via":"session" | "subscriptions/listen"}
  {"op":"wait", "method":..., "notification":{"method":..., "params":...}}   (blocks until it arrives)
  {"op":"session"} -> {"op":"session", "id":...}  (Streamable HTTP session id, null when stateless)
  {"op":"close"}   ends the MCP connection (the SDK sends DELETE for a Streamable HTTP session)
  {"op":"http", "method":..., "url":..., "headers":{...}, "json":...} -> {"op":"http", "status":..., "body":...}
      a raw request (urllib, no SDK), for the transport's own rules

Commands are one JSON object each: a JSON array on argv (--commands), or one per line on stdin, so
a test can act between steps (start a device, then send {"op":"wait",...}). A failing step prints
its error and the script goes on; a failed connect prints {"op":"connect","error":...} and exits 1.
"""

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import sys
import urllib.error
import urllib.request

import anyio

SDK_VERSION = importlib.metadata.version("mcp")
SDK_MAJOR = int(SDK_VERSION.split(".")[0])

if SDK_MAJOR >= 2:
    from mcp import Client
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.shared.exceptions import MCPError as SdkError
else:
    from mcp import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamablehttp_client
    from mcp.shared.exceptions import McpError as SdkError
    from mcp import types as mcp_types
    from pydantic import AnyUrl

# Longer than any call the tests make (the hub's own --mcp-timeout is what they exercise).
READ_TIMEOUT = 30.0
# A notification that has not come by then is a failure.
WAIT_DEADLINE = 30.0


def emit(obj):
    print(json.dumps(obj, ensure_ascii=False, sort_keys=True), flush=True)


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def walk(exc):
    """The exception and everything inside it (exception groups, causes, contexts)."""
    seen = set()
    stack = [exc]
    while stack:
        e = stack.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        yield e
        stack.extend(getattr(e, "exceptions", ()) or ())
        stack.extend([e.__cause__, e.__context__])


def describe(exc):
    """An error as the SDK reported it: a JSON-RPC error with its code, an HTTP status, or anything else."""
    for e in walk(exc):
        if isinstance(e, SdkError):
            return {"code": e.error.code, "message": e.error.message}
    for e in walk(exc):
        status = getattr(getattr(e, "response", None), "status_code", None)
        if isinstance(status, int):
            return {"status": status, "message": str(e)}
    return {"type": type(exc).__name__, "message": str(exc)}


def call_result(result):
    """The parts of a CallToolResult every SDK version models the same way."""
    out = {"content": [dump(c) for c in result.content], "isError": bool(result.isError if SDK_MAJOR < 2 else result.is_error)}
    structured = result.structuredContent if SDK_MAJOR < 2 else result.structured_content
    if structured is not None:
        out["structuredContent"] = structured
    return out


class Notifications:
    """Every server notification the session surfaced, in arrival order."""

    def __init__(self):
        self.items = []
        self.changed = anyio.Event()

    async def handler(self, message):
        if isinstance(message, Exception):
            print("mcp_client: transport error: {!r}".format(message), file=sys.stderr, flush=True)
            return
        root = getattr(message, "root", message)
        params = getattr(root, "params", None)
        self.items.append({"method": root.method, "params": dump(params) if params is not None else None})
        self.changed.set()
        self.changed = anyio.Event()

    async def wait(self, method, taken):
        """The first notification with `method` not already returned (indices in `taken`)."""
        with anyio.fail_after(WAIT_DEADLINE):
            while True:
                for i, n in enumerate(self.items):
                    if i not in taken and n["method"] == method:
                        taken.add(i)
                        return n
                await self.changed.wait()


class Connection:
    """One MCP connection through the installed SDK, whatever its major version."""

    def __init__(self, args, notes):
        self.args = args
        self.notes = notes
        self.stack = contextlib.AsyncExitStack()
        self.session_id = None
        self.protocol_version = None
        self.modern = False
        self.client = None
        self.session = None

    def headers(self):
        """The --header options as a dict, or None."""
        pairs = [h.split(":", 1) for h in self.args.header]
        return {k.strip(): v.strip() for k, v in pairs} or None

    async def open(self):
        headers = self.headers()
        if SDK_MAJOR >= 2:
            if self.args.transport == "http":

                def remember(response):
                    sid = response.headers.get("mcp-session-id")
                    if sid:
                        self.session_id = sid

                async def on_response(response):
                    remember(response)

                http = create_mcp_http_client(headers=headers)
                http.event_hooks["response"].append(on_response)
                await self.stack.enter_async_context(http)
                transport = streamable_http_client(self.args.url, http_client=http)
            else:
                transport = sse_client(self.args.url, headers=headers)
            self.client = Client(
                transport,
                mode=self.args.mode,
                message_handler=self.notes.handler,
                read_timeout_seconds=READ_TIMEOUT,
            )
            await self.stack.enter_async_context(self.client)
            self.session = self.client.session
            self.protocol_version = self.client.protocol_version
            self.modern = self.protocol_version >= "2026-07-28"
            info = self.client.server_info
            caps = self.client.server_capabilities
        else:
            if self.args.transport == "http":
                read, write, get_session_id = await self.stack.enter_async_context(
                    streamablehttp_client(self.args.url, headers=headers)
                )
                self.get_session_id = get_session_id
            else:
                read, write = await self.stack.enter_async_context(sse_client(self.args.url, headers=headers))
            self.session = await self.stack.enter_async_context(
                ClientSession(
                    read,
                    write,
                    read_timeout_seconds=datetime.timedelta(seconds=READ_TIMEOUT),
                    message_handler=self.notes.handler,
                )
            )
            init = await self.session.initialize()
            self.protocol_version = init.protocolVersion
            info = init.serverInfo
            caps = init.capabilities
        return {
            "sdk": SDK_VERSION,
            "protocolVersion": self.protocol_version,
            "serverInfo": dump(info) if info is not None else None,
            "capabilities": dump(caps) if caps is not None else None,
        }

    async def close(self):
        await self.stack.aclose()

    def current_session_id(self):
        if SDK_MAJOR < 2 and self.args.transport == "http":
            return self.get_session_id()
        return self.session_id

    async def list_tools_page(self, cursor):
        if SDK_MAJOR >= 2:
            return await self.client.list_tools(cursor=cursor)
        return await self.session.list_tools(params=mcp_types.PaginatedRequestParams(cursor=cursor))

    async def call_tool(self, name, arguments):
        if SDK_MAJOR >= 2:
            return await self.client.call_tool(name, arguments)
        return await self.session.call_tool(name, arguments)

    async def read_resource(self, uri):
        if SDK_MAJOR >= 2:
            return await self.client.read_resource(uri)
        return await self.session.read_resource(AnyUrl(uri))

    async def subscribe(self, uri):
        if self.modern:
            # 2026-07-28 removed resources/subscribe: a subscriptions/listen stream replaces it.
            await self.stack.enter_async_context(self.client.listen(resource_subscriptions=[uri]))
            return "subscriptions/listen"
        if SDK_MAJOR >= 2:
            await self.session.subscribe_resource(uri)
        else:
            await self.session.subscribe_resource(AnyUrl(uri))
        return "resources/subscribe"

    async def listen_tools(self):
        if self.modern:
            await self.stack.enter_async_context(self.client.listen(tools_list_changed=True))
            return "subscriptions/listen"
        # Before 2026-07-28 the session hears tools/list_changed without asking.
        return "session"


def raw_http(cmd):
    body = None
    headers = dict(cmd.get("headers") or {})
    if "json" in cmd:
        body = json.dumps(cmd["json"]).encode()
        headers.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(cmd["url"], data=body, method=cmd.get("method", "GET"), headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            status, text = resp.status, resp.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode(errors="replace")
    return {"status": status, "body": text}


async def run(conn, notes, cmd, taken):
    op = cmd.get("op")
    out = {"op": op}
    try:
        if op == "list_tools":
            pages, cursors, cursor = [], [], None
            while True:
                page = await conn.list_tools_page(cursor)
                pages.append([t.name for t in page.tools])
                cursor = page.nextCursor if SDK_MAJOR < 2 else page.next_cursor
                if not cursor:
                    break
                if cursor in cursors:
                    raise RuntimeError("the cursor {!r} came back: the listing does not advance".format(cursor))
                cursors.append(cursor)
            out.update(pages=pages, cursors=cursors)
        elif op == "call":
            out["name"] = cmd["name"]
            out["result"] = call_result(await conn.call_tool(cmd["name"], cmd.get("arguments") or {}))
        elif op == "read":
            out["uri"] = cmd["uri"]
            out["contents"] = [dump(c) for c in (await conn.read_resource(cmd["uri"])).contents]
        elif op == "subscribe":
            out["uri"] = cmd["uri"]
            out["via"] = await conn.subscribe(cmd["uri"])
        elif op == "listen_tools":
            out["via"] = await conn.listen_tools()
        elif op == "wait":
            out["method"] = cmd["method"]
            out["notification"] = await notes.wait(cmd["method"], taken)
        elif op == "notifications":
            out["notifications"] = notes.items
        elif op == "session":
            out["id"] = conn.current_session_id()
        elif op == "close":
            await conn.close()
        elif op == "http":
            out.update(raw_http(cmd))
        else:
            raise ValueError("unknown op {!r}".format(op))
    except Exception as e:  # every failure is a result the test asserts on
        out["error"] = describe(e)
    return out


async def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the MCP endpoint: http://HOST:PORT/mcp or …/sse")
    parser.add_argument("--transport", choices=["http", "sse"], required=True)
    parser.add_argument(
        "--mode", default="auto", help="2.x only: auto (server/discover, then initialize) or legacy (initialize only)"
    )
    parser.add_argument("--header", action="append", default=[], help="an extra HTTP header, NAME:VALUE; repeatable")
    parser.add_argument("--commands", help="a JSON array of commands; without it, one JSON command per stdin line")
    args = parser.parse_args()

    notes = Notifications()
    conn = Connection(args, notes)
    connected = False
    try:
        # One `async with` around everything: when a transport's task group fails (an HTTP 403 on
        # the first POST, say), its error surfaces here rather than as a bare cancellation.
        async with conn.stack:
            info = await conn.open()
            connected = True
            emit(dict(op="connect", **info))
            taken = set()
            if args.commands is not None:
                for cmd in json.loads(args.commands):
                    emit(await run(conn, notes, cmd, taken))
            else:
                while line := await anyio.to_thread.run_sync(sys.stdin.readline):
                    if line.strip():
                        emit(await run(conn, notes, json.loads(line), taken))
    except (Exception, BaseExceptionGroup) as e:
        if connected:
            raise
        emit({"op": "connect", "sdk": SDK_VERSION, "error": describe(e)})
        sys.exit(1)

if __name__ == "__main__":
    anyio.run(main)
