"""mcpdev side by side with its peers (issues 14 and 35): runs the four comparisons, prints one table,
and exits 1 if any comparison could not run. Started by `benches/peers/run`, which installs the
peers and passes their paths in PEERS_* variables; the figures come from this run only."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import compare_cli  # noqa: E402
import compare_memory  # noqa: E402
import compare_stdio  # noqa: E402
import compare_throughput  # noqa: E402
from procs import Children, Failure, loadavg, raise_fd_limit  # noqa: E402
from report import print_table  # noqa: E402
from servers import Scratch  # noqa: E402


def setting(name, default):
    return int(os.environ.get(name, default))


def installed(var):
    path = os.environ.get(var, "")
    return path if path and os.path.exists(path) else None


def version(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "?"


def main():
    # SIGTERM ends the run as Ctrl-C does, so every child is stopped on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tools = SimpleNamespace(mcpdev=os.environ["PEERS_MCPDEV"], node=installed("PEERS_NODE"),
                            inspector=installed("PEERS_INSPECTOR"), stackchan=installed("PEERS_STACKCHAN"),
                            wrk=installed("PEERS_WRK"), everything=installed("PEERS_EVERYTHING"))
    if not tools.node:
        tools.inspector = None
    fds = raise_fd_limit()
    print(f"mcpdev:        {version([tools.mcpdev, '--version'])} ({tools.mcpdev})")
    print(f"Inspector CLI: {os.environ.get('PEERS_INSPECTOR_VERSION', '?')} under Node "
          f"{version([tools.node, '--version']) if tools.node else '(missing)'}")
    print(f"stackchan-mcp: {os.environ.get('PEERS_STACKCHAN_VERSION', '?')}; wrk: {tools.wrk or '(missing)'}")
    print(f"CPUs: {os.cpu_count()}; open-file limit: {fds}; load average at the start: {loadavg()}")

    comparisons = [
        ("cli", lambda ch, sc: compare_cli.run(ch, sc, tools, runs=setting("PEERS_CLI_RUNS", 30), warmup=3)),
        ("throughput", lambda ch, sc: compare_throughput.run(
            ch, sc, tools, fleets=[int(n) for n in os.environ.get("PEERS_FLEETS", "1,200").split(",")],
            rounds=setting("PEERS_ROUNDS", 3), seconds=setting("PEERS_SECONDS", 5),
            conns=setting("PEERS_CONNECTIONS", 16), threads=2)),
        ("memory", lambda ch, sc: compare_memory.run(ch, sc, tools, devices=setting("PEERS_DEVICES", 1000),
                                                     rounds=setting("PEERS_MEMORY_ROUNDS", 2))),
        ("stdio", lambda ch, sc: compare_stdio.run(ch, sc, tools, runs=setting("PEERS_STDIO_RUNS", 10), warmup=1)),
    ]
    names = [name for name, _ in comparisons]
    only = sys.argv[1:] or names
    if not set(only) <= set(names):
        print(f"usage: benches/peers/run [{' '.join(names)}]...", file=sys.stderr)
        return 2
    rows, failed = [], []
    with tempfile.TemporaryDirectory(prefix="mcpdev-peers-") as tmp:
        for name, compare in comparisons:
            if name not in only:
                continue
            print(f"\n== {name} (load average {loadavg()})", flush=True)
            started = time.monotonic()
            scratch = Scratch(os.path.join(tmp, name))
            with Children() as children:
                try:
                    got = compare(children, scratch)
                    rows += got
                    for r in got:
                        print(f"   {r.measure}: mcpdev {r.mcpdev} | peer {r.peer} | {r.ratio}", flush=True)
                except Exception as e:  # noqa: BLE001 - any error ends this comparison, not the others
                    failed.append(name)
                    what = str(e) if isinstance(e, Failure) else f"{type(e).__name__}: {e}"
                    print(f"   could not run: {what}", flush=True)
                    _show_logs(scratch.root)
            print(f"   ({time.monotonic() - started:.0f} s)")
    print(f"\nload average at the end: {loadavg()} (on {os.cpu_count()} CPUs; above ~1, other work shared the machine)")
    print_table(rows, "Inspector CLI 2.x / stackchan-mcp")
    if failed:
        print(f"could not run: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def _show_logs(root):
    """The last lines of every child's log, so a failure says what the servers said."""
    for name in sorted(os.listdir(root)):
        if name.endswith(".log"):
            with open(os.path.join(root, name), errors="replace") as f:
                tail = f.readlines()[-5:]
            print(f"   --- {name} (last lines)")
            for line in tail:
                print("   " + line.rstrip()[:300])


if __name__ == "__main__":
    sys.exit(main())
