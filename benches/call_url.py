#!/usr/bin/env python3
"""Issue 24: `mcpdev call --url <hub>/mcp` to the device that sorts first and to the one that sorts
last, at a large fleet: wall time and the CLI's peak memory.

Starts `mcpdev serve` (pre-hello caps raised, so the fleet onboards fast whatever the binary) and
`mcpdev sim --count N` (the stock tools: 4 offered each, so 4·N + 1 tools on `/mcp`), waits until
the hub counts N ready devices (its `/metrics`), then runs `call --url` REPS times to each of the
two devices, alternating, and prints the medians (and the slowest) of wall time and the CLI's
peak RSS (from wait4). The same binary runs the hub, the fleet and the CLI; run it once per
binary, in the same minutes, to compare.

    benches/call_url.py target/release/mcpdev 10000 [REPS] [--search]

With --search (a binary with the fleet tools), it also times `call --url … search_devices` with a
query that matches no device (the whole fleet scanned), one that matches one, and none (the
first page).
"""

import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def ready_devices(host, state):
    # The hub's control token (the file the CLI reads) opens /metrics.
    token = open(os.path.join(state, f"control-{host.rsplit(':', 1)[1]}.token")).readline().strip()
    req = urllib.request.Request(f"http://{host}/metrics", headers={"Authorization": f"Bearer {token}"})
    text = urllib.request.urlopen(req, timeout=30).read().decode()
    return sum(int(n) for n in re.findall(r'^mcpdev_devices\{[^}]*state="ready"[^}]*\} (\d+)', text, re.M))


def timed(cmd, env, expect=b"audio_speaker"):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd} failed: {err.decode()}")
    if expect not in out:
        raise SystemExit(f"{cmd}: unexpected answer {out[:200]!r}")
    return wall, usage.ru_maxrss / 1024


def main():
    binary, n = os.path.abspath(sys.argv[1]), int(sys.argv[2])
    search = "--search" in sys.argv
    args = [a for a in sys.argv[3:] if a != "--search"]
    reps = int(args[0]) if args else 10
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    state = tempfile.mkdtemp()
    env = {"MCPDEV_STATE_DIR": state, "MCPDEV_RUNTIME_DIR": state, "PATH": "/usr/bin:/bin", "NO_COLOR": "1"}
    hub = subprocess.Popen([binary, "serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0",
                            "--max-pre-hello-per-peer", "100000", "--max-pre-hello", "100000"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    procs = [hub]
    try:
        info = json.loads(hub.stdout.readline())
        host = info["host"].split("://")[1]
        procs.append(subprocess.Popen([binary, "sim", "--url", info["devices"], "--count", str(n), "--device-id", "02:00:00:00:00:00"],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        deadline = time.time() + 600
        while ready_devices(host, state) < n:
            if time.time() > deadline:
                raise SystemExit(f"only {ready_devices(host, state)} of {n} devices ready after 600 s")
            time.sleep(0.5)
        url = f"http://{host}/mcp"
        tool = lambda i: "dev-02000000" + f"{i:04x}" + ".self.get_device_status"
        first, last = [], []
        for _ in range(reps):
            first.append(timed([binary, "call", tool(0), "--url", url], env))
            last.append(timed([binary, "call", tool(n - 1), "--url", url], env))
        searches = {}
        if search:
            for label, query in [("no_match", ["query=zzz"]), ("one_match", [f"query={n - 1:04x}"]), ("first_page", [])]:
                searches[label] = [timed([binary, "call", "search_devices", *query, "--url", url], env, b"connected") for _ in range(reps)]
        row = lambda xs: {"median_ms": round(statistics.median(w for w, _ in xs) * 1000, 1), "max_ms": round(max(w for w, _ in xs) * 1000, 1),
                          "peak_rss_mb": round(statistics.median(r for _, r in xs), 1)}
        print(json.dumps({"binary": binary, "devices": n, "reps": reps, "first": row(first), "last": row(last),
                          **{f"search_{k}": row(v) for k, v in searches.items()},
                          "loadavg": open("/proc/loadavg").read().split()[:3]}))
    finally:
        for p in procs:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
