"""One keep-alive MCP client for benches/instructions/run: opens a session on URL, then makes N
sequential tools/call requests of the virtual device's set_volume; prints how many succeeded.
With MCPDEV_BENCH_PROGRESS=1 each call carries a progressToken, as the official Rust SDK's
client puts on every request."""
import http.client, json, os, sys
url, n = sys.argv[1], int(sys.argv[2])
host = url.split('//')[1].split('/')[0]
c = http.client.HTTPConnection(host, timeout=60)
H = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
c.request("POST", "/mcp", json.dumps({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"0"}}}), H)
r = c.getresponse(); sid = r.getheader("mcp-session-id"); r.read()
H2 = dict(H); H2["mcp-session-id"] = sid
c.request("POST", "/mcp", json.dumps({"jsonrpc":"2.0","method":"notifications/initialized"}), H2); c.getresponse().read()
ok = 0
progress = os.environ.get("MCPDEV_BENCH_PROGRESS") == "1"
for i in range(n):
    params = {"name":"dev-020000000001.self.audio_speaker.set_volume","arguments":{"volume":50}}
    if progress:
        params["_meta"] = {"progressToken": i + 1}
    c.request("POST", "/mcp", json.dumps({"jsonrpc":"2.0","id":i+1,"method":"tools/call","params":params}), H2)
    b = c.getresponse().read()
    ok += b'"isError":false' in b
print(ok)
