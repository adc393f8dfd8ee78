#!/usr/bin/env python3
"""A hub's peak memory while an older client polls the unpaged `devices` listing (issue 46.2).

    MCPDEV_TEST_PYTHON=… $MCPDEV_TEST_PYTHON benches/listing_rss.py [MCPDEV_BINARY] [DEVICES] [POLLS]
    # default: target/release/mcpdev 10000 3; needs the `websockets` package (the test venv has it)

Starts `mcpdev serve --approve-all` (pre-hello caps raised: every simulated device comes from
127.0.0.1) and `mcpdev sim --count 2000` processes up to DEVICES, waits until /metrics counts them
all ready, resets the hub's peak (`5` into /proc/PID/clear_refs) and reads its VmRSS and VmHWM, then sends POLLS unpaged `{"op":"devices"}`
requests one after another on one control connection (what a client older than paging sends),
checks each answer whole (DEVICES devices, in Device-Id order) and reads VmHWM again. Prints one
row: resident before, peak (after the reset) before and after the polls, the peak's growth, and the polls' times.
"""
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import websockets

here = os.path.dirname(os.path.abspath(__file__))
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(here), "target/release/mcpdev")
devices = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
polls = int(sys.argv[3]) if len(sys.argv) > 3 else 3
PER_SIM = 2000


def proc_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def ready(host, token):
    req = urllib.request.Request(f"{host}/metrics", headers={"Authorization": f"Bearer {token}"})
    text = urllib.request.urlopen(req, timeout=30).read().decode()
    return sum(int(float(v)) for v in re.findall(r'^mcpdev_devices\{state="ready"[^}]*\} (\S+)$', text, re.M))


async def poll(host, token):
    url = host.replace("http://", "ws://") + "/api/v1/link"
    times = []
    async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {token}"}, max_size=1 << 30) as ws:
        for n in range(polls):
            start = time.monotonic()
            await ws.send(json.dumps({"id": n, "op": "devices"}))
            answer = json.loads(await ws.recv())
            times.append(time.monotonic() - start)
            ids = [d["device_id"] for d in answer["ok"]]
            assert answer["id"] == n and len(ids) == devices and ids == sorted(set(ids)), (answer.get("id"), len(ids))
    return times


def main():
    state, runtime = tempfile.mkdtemp(), tempfile.mkdtemp()
    os.chmod(runtime, 0o700)
    env = {**os.environ, "MCPDEV_STATE_DIR": state, "MCPDEV_RUNTIME_DIR": runtime, "NO_COLOR": "1"}
    cap = str(max(devices, 4096))
    hub = subprocess.Popen([binary, "serve", "--json", "--approve-all", "--device-addr", "127.0.0.1:0", "--host-addr", "127.0.0.1:0",
                            "--max-pre-hello-per-peer", cap, "--max-pre-hello", cap], stdout=subprocess.PIPE, env=env)
    sims = []
    try:
        listening = json.loads(hub.stdout.readline())
        # The event log is read and dropped, as a log reader would.
        subprocess.Popen(["cat"], stdin=hub.stdout, stdout=subprocess.DEVNULL)
        host, url = listening["host"], listening["devices"]
        port = host.rsplit(":", 1)[1]
        token = open(os.path.join(runtime, f"control-{port}.token")).readline().strip()
        for first in range(0, devices, PER_SIM):
            count = min(PER_SIM, devices - first)
            mac = f"{0x0a0000000000 + first:012x}"
            sims.append(subprocess.Popen([binary, "sim", "--quiet", "--url", url, "--count", str(count), "--device-id", ":".join(mac[i:i + 2] for i in range(0, 12, 2))],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env))
        start = time.monotonic()
        while (n := ready(host, token)) < devices:
            if time.monotonic() - start > 900:
                sys.exit(f"only {n} of {devices} devices ready after 900 s")
            time.sleep(2)
        time.sleep(5)
        # The peak so far is the fleet's arrival: it is reset, so the peak read after is the polls'.
        with open(f"/proc/{hub.pid}/clear_refs", "w") as f:
            f.write("5")
        rss, hwm = proc_kib(hub.pid, "VmRSS"), proc_kib(hub.pid, "VmHWM")
        times = asyncio.run(poll(host, token))
        peak = proc_kib(hub.pid, "VmHWM")
        print(f"binary {binary}; {devices} devices ready after {time.monotonic() - start:.0f} s; load {os.getloadavg()[0]:.1f}")
        print("| devices | resident before | peak before | peak after the polls | peak growth | each poll took |")
        print("|---:|---:|---:|---:|---:|---|")
        print(f"| {devices:,} | {rss / 1024:.1f} MB | {hwm / 1024:.1f} MB | {peak / 1024:.1f} MB | +{(peak - hwm) / 1024:.1f} MB | {', '.join(f'{t:.2f} s' for t in times)} |")
    finally:
        for p in sims + [hub]:
            p.terminate()
        for p in sims + [hub]:
            p.wait()


main()
