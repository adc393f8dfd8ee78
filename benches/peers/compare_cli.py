"""Comparison 1: one `tools/call` from the command line, timed from spawning the process until it
has exited. mcpdev's CLI (through the hub's control API, and as an MCP client of the hub's `/mcp`)
against the MCP Inspector's CLI on the same `/mcp`, one run of each in turn."""

import statistics
import subprocess
import time

from procs import Failure
from report import Row, ms, ratio, spread
from servers import McpdevHub, confirm, mac, start_sims, wait_ready

CALL_DEADLINE_S = 30


def run(children, scratch, tools, runs, warmup):
    if not tools.inspector:
        raise Failure("the MCP Inspector (or Node 22) is not installed: see the install messages above")
    hub = McpdevHub(children, scratch, tools.mcpdev, "cli")
    sim = start_sims(children, scratch, tools.mcpdev, hub.device_url, 1, 1, "cli")
    wait_ready(hub, 1, 30, sim)
    confirm(hub, 1)
    device = mac(1)
    env = dict(scratch.env, MCPDEV_HUB=hub.host_url)
    commands = {
        "mcpdev call -d (hub)": [tools.mcpdev, "call", "self.audio_speaker.set_volume", "volume=50", "-d", device],
        "mcpdev call --url": [tools.mcpdev, "call", "--url", hub.mcp_url, hub.tool(device), "volume=50"],
        "Inspector CLI": [tools.node, tools.inspector, "--cli", hub.mcp_url, "--transport", "http",
                          "--method", "tools/call", "--tool-name", hub.tool(device), "--tool-arg", "volume=50"],
    }
    times = {name: [] for name in commands}
    names = list(commands)
    for i in range(warmup + runs):
        # One run of each in turn, starting with a different one each time, so a change in the
        # machine's load falls on all alike.
        for name in names[i % 3:] + names[:i % 3]:
            took = timed(name, commands[name], env, scratch.root)
            if i >= warmup:
                times[name].append(took)
    children.stop(sim)
    children.stop(hub.proc)

    inspector = times["Inspector CLI"]
    rows = []
    for name in ("mcpdev call -d (hub)", "mcpdev call --url"):
        mine = times[name]
        rows.append(Row("CLI call, 1 device", f"`{name}` vs Inspector CLI: wall time, median (p10–p90), {runs} runs",
                        f"{ms(statistics.median(mine))} ({spread(mine, ms)})",
                        f"{ms(statistics.median(inspector))} ({spread(inspector, ms)})",
                        ratio(statistics.median(inspector), statistics.median(mine))))
    return rows


def timed(name, args, env, cwd, expect="true", deadline=CALL_DEADLINE_S):
    """Seconds from spawning `args` until it exited 0 with `expect` on stdout (else Failure)."""
    start = time.perf_counter()
    try:
        out = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=deadline)
    except subprocess.TimeoutExpired:
        raise Failure(f"{name}: no exit within {deadline} s")
    took = time.perf_counter() - start
    if out.returncode != 0 or expect not in out.stdout:
        raise Failure(f"{name}: exit {out.returncode}, stdout {out.stdout.strip()[:200]!r}, stderr {out.stderr.strip()[:300]!r}")
    return took
