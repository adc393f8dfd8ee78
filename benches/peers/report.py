"""Figures as text, and the table the bench prints."""

from dataclasses import dataclass


@dataclass
class Row:
    comparison: str
    measure: str
    mcpdev: str
    peer: str
    ratio: str


def ms(seconds):
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def percentile(values, p):
    """Nearest-rank percentile of a non-empty list."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def spread(values, fmt):
    return f"{fmt(percentile(values, 10))}–{fmt(percentile(values, 90))}"


def ratio(a, b):
    """a ÷ b: the peer's cost over mcpdev's (time, memory, CPU), or mcpdev's rate over the
    peer's, so above 1 is in mcpdev's favour either way."""
    if b <= 0:
        return "n/a"
    return f"{a / b:.1f}×" if a / b >= 1.95 else f"{a / b:.2f}×"


def print_table(rows, peer_names):
    print()
    print(f"| comparison | measure | mcpdev | peer ({peer_names}) | ratio, in mcpdev's favour |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r.comparison} | {r.measure} | {r.mcpdev} | {r.peer} | {r.ratio} |")
    print()
