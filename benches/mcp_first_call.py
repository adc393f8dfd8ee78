#!/usr/bin/env python3
"""Issue 24: what the first `/mcp` tools/call after a device joins or leaves costs the hub.

Starts `mcpdev serve` and `mcpdev sim --count N` (the stock tools: 4 each), opens one MCP session
that lists every tool (as a host does), then 20 times: one more device joins (a second `sim`),
the first call after it is timed, a steady call is timed, the device leaves, and the first call
after that is timed. Prints the medians of the calls' wall time, and of the hub's CPU time per
first call after a join and per steady call (the sum of its threads' `schedstat` run time, in
nanoseconds; it includes whatever else the hub did meanwhile, e.g. a keepalive ping). It also reads the hub's memory (`VmRSS`, and its peak
`VmHWM`) at start, once the fleet is ready and idle, once the host has listed every tool, and
after the 20 joins and leaves (issue 24: <= 5 KB per device, settled and peak), each over the
fleet's size. `MCPDEV_HEAP_TRIM` is passed on to the hub, to compare with the trim off;
`HUB_BENCH_CAPS=default` keeps the hub's default pre-hello caps (see `main`).

    benches/mcp_first_call.py target/release/mcpdev 10000
"""

import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TICK = os.sysconf("SC_CLK_TCK")


def kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def settle(pids, quiet=2.0, limit=30.0):
    """Waits until `pids` used at most one clock tick of CPU in each quarter second for `quiet` s."""
    start, calm = time.monotonic(), 0.0
    last = sum(cpu_s(p) for p in pids)
    while calm < quiet and time.monotonic() - start < limit:
        time.sleep(0.25)
        now = sum(cpu_s(p) for p in pids)
        calm = calm + 0.25 if now - last <= 1.0 / TICK else 0.0
        last = now
    return time.monotonic() - start


def cpu_ns_s(pid):
    """The process's CPU time in seconds, at nanosecond resolution (each thread's schedstat)."""
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:
            pass
    return total / 1e9


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Mcp:
    def __init__(self, host):
        self.host = host
        self.conn = http.client.HTTPConnection(host)
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        self.id = 0
        self.rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}, keep=True)
        self.rpc(None, None)

    def rpc(self, method, params, keep=False):
        if method is None:
            body = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        else:
            self.id += 1
            body = {"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}
        try:
            self.conn.request("POST", "/mcp", json.dumps(body), self.headers)
            resp = self.conn.getresponse()
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            # The hub closed the idle keep-alive connection (the session lives on): connect again.
            self.conn.close()
            self.conn = http.client.HTTPConnection(self.host)
            self.conn.request("POST", "/mcp", json.dumps(body), self.headers)
            resp = self.conn.getresponse()
        data = resp.read().decode()
        if keep:
            self.headers["Mcp-Session-Id"] = resp.getheader("Mcp-Session-Id")
        for line in data.splitlines():
            if line.startswith("data:") and line[5:].strip():
                return json.loads(line[5:])
        return json.loads(data) if data.strip() else None


def ready_devices(host, state):
    """The hub's count of ready devices, from its Prometheus metrics: cheap at any fleet size, unlike
    the `list_devices` tool, whose answer at 10,000 devices (a JSON tree of every device, built
    each half second while the fleet onboards) was the hub's memory peak in this bench before
    2026-11-26, which no host listing its tools would cause."""
    port = host.rsplit(":", 1)[1]
    with open(os.path.join(state, f"control-{port}.token")) as f:
        token = f.readline().strip()
    conn = http.client.HTTPConnection(host)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
    text = conn.getresponse().read().decode()
    conn.close()
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in text.splitlines() if line.startswith('mcpdev_devices{state="ready"'))


def main():
    binary, n = sys.argv[1], int(sys.argv[2])
    state = tempfile.mkdtemp()
    # The full face (every device's tools listed), which is what this bench measures: without it a
    # hub of this mcpdev offers the fleet tools above 32 devices. An older binary ignores the variable.
    env = {"MCPDEV_STATE_DIR": state, "MCPDEV_RUNTIME_DIR": state, "PATH": "/usr/bin:/bin", "MCPDEV_MCP_FLEET_THRESHOLD": "1000000"}
    if "MCPDEV_HEAP_TRIM" in os.environ:
        env["MCPDEV_HEAP_TRIM"] = os.environ["MCPDEV_HEAP_TRIM"]
    # HUB_BENCH_CAPS=default keeps the hub's pre-hello caps (16 per address, 512 in all), as an
    # operator runs it: the fleet, all from 127.0.0.1, waits in the accept queue. Otherwise they
    # are raised out of reach and all 10,000 handshakes run at once (the figures before 2026-11-26).
    caps = [] if os.environ.get("HUB_BENCH_CAPS") == "default" else ["--max-pre-hello-per-peer", "100000", "--max-pre-hello", "100000"]
    hub = subprocess.Popen([binary, "serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0"] + caps,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    procs = [hub]
    try:
        info = json.loads(hub.stdout.readline())
        host = info["host"].split("://")[1]
        settle([hub.pid], quiet=1.0)
        rss = {"start": kb(hub.pid, "VmRSS")}
        procs.append(subprocess.Popen([binary, "sim", "--url", info["devices"], "--count", str(n), "--device-id", "02:00:00:00:00:00"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        mcp = Mcp(host)
        while ready_devices(host, state) < n:
            time.sleep(0.5)
        settle([hub.pid, procs[1].pid])
        rss["fleet"] = kb(hub.pid, "VmRSS")
        cursor, listed = None, 0
        while True:
            r = mcp.rpc("tools/list", {"cursor": cursor} if cursor else {})
            listed += len(r["result"]["tools"])
            cursor = r["result"].get("nextCursor")
            if not cursor:
                break
        settle([hub.pid])
        rss["listed"] = kb(hub.pid, "VmRSS")
        last = "dev-" + "02000000" + f"{n - 1:04x}" + ".self.audio_speaker.set_volume"
        call = lambda: mcp.rpc("tools/call", {"name": last, "arguments": {"volume": 40}})
        call()
        first_join, steady, first_leave, cpu_join, cpu_steady = [], [], [], [], []
        for k in range(20):
            joiner = subprocess.Popen([binary, "sim", "--url", info["devices"], "--device-id", f"02:00:00:ff:00:{k:02x}"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            # Waited for through the control API: an MCP request would apply the join itself.
            subprocess.run([binary, "tools", "list", "-d", f"02:00:00:ff:00:{k:02x}", "--wait", "30s", "--json"], env={**env, "MCPDEV_HUB": info["host"]},
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            time.sleep(2)  # the device's confirmation re-list (1.5 s) is over: only the join is left to apply
            c0, t0 = cpu_ns_s(hub.pid), time.perf_counter()
            call()
            first_join.append(time.perf_counter() - t0)
            cpu_join.append(cpu_ns_s(hub.pid) - c0)
            c0, t0 = cpu_ns_s(hub.pid), time.perf_counter()
            call()
            steady.append(time.perf_counter() - t0)
            cpu_steady.append(cpu_ns_s(hub.pid) - c0)
            joiner.kill()
            joiner.wait()
            while subprocess.run([binary, "tools", "list", "-d", f"02:00:00:ff:00:{k:02x}", "--json"], env={**env, "MCPDEV_HUB": info["host"]},
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                time.sleep(0.05)
            t0 = time.perf_counter()
            call()
            first_leave.append(time.perf_counter() - t0)
        settle([hub.pid, procs[1].pid])
        rss["churned"] = kb(hub.pid, "VmRSS")
        rss["peak"] = kb(hub.pid, "VmHWM")
        per_device = {k: round((v - rss["start"]) / n, 2) for k, v in rss.items() if k != "start"}
        ms = lambda xs: round(statistics.median(xs) * 1000, 2)
        print(json.dumps({"devices": n, "tools_listed": listed, "first_call_after_join_ms": ms(first_join),
                          "steady_call_ms": ms(steady), "first_call_after_leave_ms": ms(first_leave),
                          "hub_cpu_first_call_after_join_ms": ms(cpu_join), "hub_cpu_steady_call_ms": ms(cpu_steady),
                          "hub_rss_mb": {k: round(v / 1024, 1) for k, v in rss.items()}, "hub_kb_per_device": per_device}))
    finally:
        for p in procs:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
