"""Comparison 4: mcpdev as a client of a stdio MCP server, against the MCP Inspector's CLI.
Both start the same `@modelcontextprotocol/server-everything` (npm) under the same Node 22 as
their child, do one request (tools/list, tools/call, resources/read, prompts/get), and exit;
timed from spawning the client until it has exited, one run of each in turn. The server's own
start (Node loading its bundle) is in both figures alike."""

import statistics

from compare_cli import timed
from procs import Failure
from report import Row, ms, ratio, spread

DEADLINE_S = 60

# (measure, mcpdev's words, the Inspector CLI's words, what both outputs must hold)
OPERATIONS = [
    ("tools/list", ["tools", "list"], ["--method", "tools/list"], "get-sum"),
    ("tools/call get-sum", ["call", "get-sum", "a=2", "b=3"],
     ["--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "--tool-arg", "b=3"], "is 5"),
    ("resources/read", ["resources", "read", "demo://resource/dynamic/text/1"],
     ["--method", "resources/read", "--uri", "demo://resource/dynamic/text/1"], "Resource 1"),
    ("prompts/get", ["prompts", "get", "args-prompt", "city=Paris"],
     ["--method", "prompts/get", "--prompt-name", "args-prompt", "--prompt-args", "city=Paris"], "Paris"),
]


def run(children, scratch, tools, runs, warmup):
    if not (tools.inspector and tools.everything):
        raise Failure("the MCP Inspector, Node 22 or server-everything is not installed: see the install messages above")
    server = [tools.node, tools.everything, "stdio"]
    line = " ".join(server)
    rows = []
    for measure, mine, theirs, expect in OPERATIONS:
        commands = {
            "mcpdev": [tools.mcpdev, *mine, "--stdio", line],
            "Inspector CLI": [tools.node, tools.inspector, "--cli", *server, *theirs],
        }
        times = {name: [] for name in commands}
        names = list(commands)
        for i in range(warmup + runs):
            for name in names[i % 2:] + names[:i % 2]:
                took = timed(f"{name} {measure}", commands[name], scratch.env, scratch.root, expect, DEADLINE_S)
                if i >= warmup:
                    times[name].append(took)
        m, p = times["mcpdev"], times["Inspector CLI"]
        rows.append(Row("stdio server (server-everything)", f"{measure}: `mcpdev … --stdio` vs Inspector CLI, wall time, median (p10–p90), {runs} runs",
                        f"{ms(statistics.median(m))} ({spread(m, ms)})", f"{ms(statistics.median(p))} ({spread(p, ms)})",
                        ratio(statistics.median(p), statistics.median(m))))
    return rows
