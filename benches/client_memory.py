#!/usr/bin/env python3
"""CLI memory against a hostile MCP server's message size (issue 44 item 4).

    python3 benches/client_memory.py [MCPDEV_BINARY] [SIZES_MIB...]   # default: target/release/mcpdev 1 4 8 16

Runs `mcpdev tools list --stdio SERVER` (a table, and with --json) against
tests/fixtures/hostile_stdio_server.py, whose `tools/list` answer is one message of the given size
in the shape that costs a client the most (see the fixture), and `notes:32:4MiB` (32
notifications of 4 MiB before the answer). Prints the peak resident memory of the mcpdev process
(ru_maxrss of wait4: it and the children it waited for, the Python server included, whichever is
larger) beside a well-behaved server's, and the growth over it divided by the message size.
"""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(repo, "target/release/mcpdev")
sizes = [int(s) for s in sys.argv[2:]] or [1, 4, 8, 16]
server = os.path.join(repo, "tests/fixtures/hostile_stdio_server.py")


def peak(mode, json_out):
    args = [binary, "tools", "list", "--stdio", f"python3 {server} {mode}", "--timeout", "120s"] + (["--json"] if json_out else [])
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "NO_COLOR": "1"})
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    return os.waitstatus_to_exitcode(status), ru.ru_maxrss, err.decode(errors="replace").strip().splitlines()[-1:] 


base = {j: peak("plain", j)[1] for j in (False, True)}
print(f"binary: {binary}; a well-behaved server: {base[False]} KiB (table), {base[True]} KiB (--json)\n")
print("| message | output | exit | peak RSS KiB | growth / message size |")
print("|---|---|---:|---:|---:|")
for mib in sizes:
    for shape in ("objects", "tools", "numbers", "string"):
        for j in (False, True):
            code, kib, _ = peak(f"big-tools:{shape}:{mib << 20}", j)
            print(f"| {mib} MiB `{shape}` | {'json' if j else 'table'} | {code} | {kib:,} | {(kib - base[j]) / (mib << 10):.1f}x |")
code, kib, _ = peak(f"notes:32:{4 << 20}", False)
print(f"| 32 notifications of 4 MiB | table | {code} | {kib:,} | {(kib - base[False]) / (4 << 10):.1f}x of one |")
