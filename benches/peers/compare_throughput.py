"""Comparison 2: `tools/call` throughput through each server's MCP endpoint.

Both servers run side by side, each with its own `mcpdev sim` fleet. wrk keeps `conns` keep-alive
connections busy with `set_volume` calls (to the same volume each time, so no state_changed
follows), each call to the next device of the fleet in turn; one MCP session per wrk thread.
Rounds alternate between the servers (the first one each round alternates too), and the hub's CPU
time (/proc/PID/stat) is read around each round."""

import json
import os
import statistics
import subprocess

from mcp_http import McpSession
from procs import Failure, cpu_seconds
from report import Row, ratio
from servers import McpdevHub, Stackchan, confirm, mac, start_sims, wait_ready

LUA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "call.lua")
EXPECT = '"text":"true"'  # what the device's set_volume answers, in both servers' replies
VOLUME = 50


def run(children, scratch, tools, fleets, rounds, seconds, conns, threads):
    if not tools.stackchan:
        raise Failure("stackchan-mcp is not installed: see the install messages above")
    if not tools.wrk:
        raise Failure("wrk is not installed (Debian package `wrk`)")
    servers = [McpdevHub(children, scratch, tools.mcpdev, "throughput"), Stackchan(children, scratch, tools.stackchan, "throughput")]
    sessions = {s.name: [McpSession(s.mcp_url) for _ in range(threads)] for s in servers}
    rows, connected = [], 0
    for fleet in sorted(fleets):
        sims = [start_sims(children, scratch, tools.mcpdev, s.device_url, fleet - connected, connected + 1, f"{s.name}-{fleet}")
                for s in servers]
        for s, sim in zip(servers, sims):
            wait_ready(s, fleet, 60 + fleet / 10, sim)
            confirm(s, fleet)
        connected = fleet
        bodies = {s.name: _bodies(scratch, s, fleet) for s in servers}

        def round_(s, secs):
            return _wrk(s, bodies[s.name], [x.session_id for x in sessions[s.name]], secs, conns, threads)

        for s in servers:
            round_(s, 2)  # warm-up, not counted
        results = {s.name: [] for s in servers}
        for r in range(rounds):
            for s in (servers if r % 2 == 0 else servers[::-1]):
                got = round_(s, seconds)
                results[s.name].append(got)
                print(f"   {fleet} device(s), round {r + 1}, {s.name}: {got['calls']} calls, {got['rate']:,.0f}/s, "
                      f"p99 {got['p99_ms']:.1f} ms, {got['cpu_us']:,.0f} µs CPU per call", flush=True)
        rows += _rows(fleet, results, rounds, seconds, conns)
    return rows


def _bodies(scratch, server, fleet):
    """One JSON-RPC tools/call per device of the fleet, one per line, `__ID__` for the id."""
    path = scratch.path(f"bodies-{server.name}-{fleet}.txt")
    with open(path, "w") as f:
        for n in range(1, fleet + 1):
            call = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": server.call_request(mac(n), VOLUME)}
            f.write(json.dumps(call, separators=(",", ":")).replace('"id":0', '"id":__ID__', 1) + "\n")
    return path


def _wrk(server, bodies, session_ids, seconds, conns, threads):
    cpu0 = cpu_seconds(server.pid)
    args = [os.environ.get("PEERS_WRK", "wrk"), "-t", str(threads), "-c", str(conns), "-d", f"{seconds}s", "--timeout", "10s",
            "-s", LUA, server.mcp_url, "--", bodies, EXPECT, *session_ids]
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=seconds + 30)
    except subprocess.TimeoutExpired:
        raise Failure(f"wrk against {server.name}: no exit within {seconds + 30} s")
    cpu = cpu_seconds(server.pid) - cpu0
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise Failure(f"wrk against {server.name}: exit {out.returncode}: {out.stdout[-300:]} {out.stderr[-300:]}")
    w = json.loads(lines[-1])
    if w["requests"] == 0 or w["bad"] or w["socket_errors"]:
        raise Failure(f"wrk against {server.name}: {w['requests']} answers, {w['bad']} bad, {w['socket_errors']} socket errors")
    return {"rate": w["requests"] / (w["duration_us"] / 1e6), "p99_ms": w["p99_us"] / 1000,
            "cpu_us": cpu / w["requests"] * 1e6, "calls": w["requests"]}


def _rows(fleet, results, rounds, seconds, conns):
    mine, theirs = results["mcpdev"], results["stackchan-mcp"]

    def med(rs, key):
        return statistics.median(r[key] for r in rs)

    def span(rs, key, fmt):
        vals = [r[key] for r in rs]
        return f"{fmt(statistics.median(vals))} ({fmt(min(vals))}–{fmt(max(vals))})"

    rate = lambda v: f"{v:,.0f}/s"
    p99 = lambda v: f"{v:.1f} ms"
    cpu = lambda v: f"{v:,.0f} µs"
    what = f"{fleet} device{'s' if fleet > 1 else ''}"
    how = f"{conns} connections, {rounds} × {seconds} s, median (min–max)"
    return [
        Row(f"`/mcp` tools/call, {what}", f"calls/s, {how}", span(mine, "rate", rate), span(theirs, "rate", rate),
            ratio(med(mine, "rate"), med(theirs, "rate"))),
        Row(f"`/mcp` tools/call, {what}", "p99 latency (wrk), median (min–max) of rounds", span(mine, "p99_ms", p99),
            span(theirs, "p99_ms", p99), ratio(med(theirs, "p99_ms"), med(mine, "p99_ms"))),
        Row(f"`/mcp` tools/call, {what}", "server CPU per call (utime+stime)", span(mine, "cpu_us", cpu),
            span(theirs, "cpu_us", cpu), ratio(med(theirs, "cpu_us"), med(mine, "cpu_us"))),
    ]
