"""Comparison 3: the server's memory per connected device.

A fresh server, its VmRSS once it has settled with no device, then `devices` virtual devices (one
`mcpdev sim` process) until every one is ready, and VmRSS again after a settling pause; the
difference over the count is the memory per device. The servers take turns, each round starting
with the other one."""

import statistics
import time

from procs import Failure, status_kb
from report import Row, ratio
from servers import McpdevHub, Stackchan, confirm, start_sims, wait_ready

SETTLE_S = 2


def run(children, scratch, tools, devices, rounds):
    if not tools.stackchan:
        raise Failure("stackchan-mcp is not installed: see the install messages above")
    kinds = [(McpdevHub, tools.mcpdev), (Stackchan, tools.stackchan)]
    results = {"mcpdev": [], "stackchan-mcp": []}
    for r in range(rounds):
        for kind, exe in (kinds if r % 2 == 0 else kinds[::-1]):
            server = kind(children, scratch, exe, f"memory-{r}")
            time.sleep(SETTLE_S)
            before = status_kb(server.pid, "VmRSS")
            sim = start_sims(children, scratch, tools.mcpdev, server.device_url, devices, 1, f"memory-{server.name}-{r}")
            started = time.monotonic()
            wait_ready(server, devices, 60 + devices / 5, sim)
            onboard_s = time.monotonic() - started
            time.sleep(SETTLE_S)
            after, peak = status_kb(server.pid, "VmRSS"), status_kb(server.pid, "VmHWM")
            confirm(server, devices)
            results[server.name].append({"per_device": (after - before) / devices, "before": before, "after": after,
                                         "peak": peak, "onboard_s": onboard_s})
            children.stop(sim)
            children.stop(server.proc)
    return _rows(results, devices, rounds)


def _rows(results, devices, rounds):
    mine, theirs = results["mcpdev"], results["stackchan-mcp"]
    kb = lambda v: f"{v:.1f} KB"

    def per_device(rs):
        vals = [r["per_device"] for r in rs]
        return f"{kb(statistics.median(vals))} ({kb(min(vals))}–{kb(max(vals))})"

    def rss(rs):
        return ", ".join(f"{r['before'] / 1024:.1f} → {r['after'] / 1024:.1f} ({r['peak'] / 1024:.1f}) MB" for r in rs)

    def onboard(rs):
        return ", ".join(f"{r['onboard_s']:.1f} s" for r in rs)

    med = lambda rs, key: statistics.median(r[key] for r in rs)
    what = f"{devices:,} devices"
    return [
        Row(what, f"server memory per device (VmRSS after − before) ÷ {devices:,}, median (min–max) of {rounds}",
            per_device(mine), per_device(theirs), ratio(med(theirs, "per_device"), med(mine, "per_device"))),
        Row(what, "server VmRSS before → after (peak), each round", rss(mine), rss(theirs), ""),
        Row(what, "all ready, from starting the simulator (its log read every 0.1 s), each round", onboard(mine), onboard(theirs),
            ratio(med(theirs, "onboard_s"), med(mine, "onboard_s"))),
    ]
