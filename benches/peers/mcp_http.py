"""A minimal MCP Streamable HTTP client (initialize, notifications/initialized, requests) for
setting up sessions and reading state; the measured calls are made by wrk or the CLIs."""

import http.client
import json
from urllib.parse import urlsplit

PROTOCOL = "2025-06-18"


class McpSession:
    def __init__(self, url, timeout=10.0):
        parts = urlsplit(url)
        self.path = parts.path or "/"
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
        self.session_id = None
        self.next_id = 1
        init = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                           "clientInfo": {"name": "mcpdev-peers-bench", "version": "1"}})
        if "protocolVersion" not in init:
            raise ValueError(f"initialize answered {init}")
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def close(self):
        self.conn.close()

    def request(self, method, params):
        """Sends one request and returns its `result` (ValueError on a JSON-RPC error)."""
        rid = self.next_id
        self.next_id += 1
        reply = self._post({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if reply is None or "result" not in reply:
            raise ValueError(f"{method} answered {reply}")
        return reply["result"]

    def call_text(self, tool, arguments):
        """`tools/call`; the text of the result's first content item."""
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        return result["content"][0]["text"]

    def _post(self, message):
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": PROTOCOL}
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        try:
            resp, body = self._exchange(message, headers)
        except (http.client.HTTPException, OSError):
            # The server closed an idle keep-alive connection (uvicorn does after 5 s): once more
            # on a new one; the MCP session is not tied to the connection.
            self.conn.close()
            resp, body = self._exchange(message, headers)
        if resp.status >= 300:
            raise ValueError(f"HTTP {resp.status}: {body[:200]}")
        self.session_id = resp.getheader("Mcp-Session-Id") or self.session_id
        if "id" not in message:
            return None
        return _reply_for(body, resp.getheader("Content-Type", ""), message["id"])

    def _exchange(self, message, headers):
        self.conn.request("POST", self.path, body=json.dumps(message), headers=headers)
        resp = self.conn.getresponse()
        return resp, resp.read().decode()


def _reply_for(body, content_type, rid):
    """The JSON-RPC reply with id `rid` in a JSON body or an SSE stream."""
    if content_type.startswith("application/json"):
        return json.loads(body)
    for line in body.splitlines():
        if line.startswith("data:") and line[5:].strip():
            msg = json.loads(line[5:])
            if msg.get("id") == rid:
                return msg
    raise ValueError(f"no reply with id {rid} in {body[:200]!r}")
