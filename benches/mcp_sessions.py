#!/usr/bin/env python3
"""Issue 22 item 7: what a flood of MCP `initialize` requests makes the hub hold.

Starts `mcpdev serve` (the binary given, with any extra hub flags after `--`), sends N
`initialize` POSTs to /mcp over one kept-alive connection, ends every session it got with a
DELETE, and prints the hub's RSS (VmRSS) before, after the flood, and after the sessions ended.

    benches/mcp_sessions.py target/release/mcpdev 20000
    benches/mcp_sessions.py target/release/mcpdev 20000 -- --mcp-max-sessions 100000 --mcp-max-sessions-per-peer 100000
"""

import http.client
import json
import subprocess
import sys
import tempfile
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main():
    args = sys.argv[1:]
    extra = []
    if "--" in args:
        at = args.index("--")
        args, extra = args[:at], args[at + 1:]
    binary, n = args[0], int(args[1])
    state = tempfile.mkdtemp()
    hub = subprocess.Popen(
        [binary, "serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={"MCPDEV_STATE_DIR": state, "MCPDEV_RUNTIME_DIR": state, "PATH": "/usr/bin:/bin"},
    )
    try:
        info = json.loads(hub.stdout.readline())
        host = info["host"].split("://")[1]
        time.sleep(1)
        before = rss_kib(hub.pid)
        conn = http.client.HTTPConnection(host)
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        sessions, refused = [], 0
        start = time.monotonic()
        for i in range(n):
            body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "initialize",
                               "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}})
            conn.request("POST", "/mcp", body, headers)
            resp = conn.getresponse()
            resp.read()
            if resp.status == 200:
                sessions.append(resp.getheader("Mcp-Session-Id"))
            elif resp.status == 503:
                refused += 1
            else:
                raise RuntimeError(f"unexpected status {resp.status}")
        took = time.monotonic() - start
        time.sleep(1)
        flooded = rss_kib(hub.pid)
        for s in sessions:
            conn.request("DELETE", "/mcp", headers={"Mcp-Session-Id": s})
            conn.getresponse().read()
        time.sleep(2)
        ended = rss_kib(hub.pid)
        print(json.dumps({"initialize": n, "sessions": len(sessions), "refused": refused, "flood_s": round(took, 1),
                          "rss_before_mib": round(before / 1024, 1), "rss_after_flood_mib": round(flooded / 1024, 1),
                          "rss_after_end_mib": round(ended / 1024, 1)}))
    finally:
        hub.kill()
        hub.wait()


if __name__ == "__main__":
    main()
