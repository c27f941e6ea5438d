"""Compare source trees on benchmarks/soak.py's load, interleaved, round after round: on a shared
or drifting machine one tree's run against another's minutes apart says little.

Run:   .venv/bin/python benchmarks/soak_ab.py /tmp/before . --rate 400 --seconds 30 --rounds 3
       (several rates: --rate 20 --rate 400 --rate 800; each round runs every tree at each rate)
Each tree is a checkout holding benchmarks/soak.py, which runs the daemon from its own tree (its
header names the notifyd/__init__.py it imports). Any argument after `--` goes to soak.py as it
is (`-- --event-loop asyncio`, `-- --batch 100`). Per run it prints the figures the engine's
costs are judged by: the daemon's CPU per notification, the due lag p99 of each step, the accept
p99, the claim transactions per second, and whether the correctness counts were all zero; then
the median of each per tree and rate.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

FIGURES = {  # name -> pattern over soak.py's output (the first group is the number)
    "cpu ms/notif": r"daemon CPU over the timed phase .*?, ([\d.]+) ms per\s+notification",
    "lag A p99": r"  A \(step 0\),.*?p99\s+([\d.]+)",
    "lag B p99": r"  B \(step 1\),.*?p99\s+([\d.]+)",
    "lag C p99": r"  C \(step 2\),.*?p99\s+([\d.]+)",
    "accept p99": r"  latency, due to answer \([^)]*\): p50\s+[\d.]+\s+p99\s+([\d.]+)",
    "claims": r"claim transactions \(one ms of started_at each\): (\d+)",
}


def figures(out: str, seconds: float) -> dict[str, float]:
    found = {}
    for name, pattern in FIGURES.items():
        m = re.search(pattern, out, re.S)
        found[name] = float(m.group(1)) if m else float("nan")
    found["claims"] = found["claims"] / seconds  # per second of the timed phase
    return found


def run(tree: Path, rate: float, seconds: float, extra: list[str]) -> tuple[dict[str, float], bool]:
    cmd = [sys.executable, str(tree / "benchmarks" / "soak.py"), "--rate", f"{rate:g}",
           "--seconds", f"{seconds:g}", *extra]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=tree)
    out = done.stdout + done.stderr
    if "notifyd/__init__.py" in out and str(tree.resolve()) not in out:
        print(f"  ! {tree}: soak.py imported another tree's notifyd", flush=True)
    return figures(out, seconds), done.returncode == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trees", nargs="+", type=Path)
    ap.add_argument("--rate", type=float, action="append", help="accepts/s (repeatable)")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    args, extra = ap.parse_known_args()
    extra = [a for a in extra if a != "--"]
    rates = args.rate or [400.0]
    got: dict[tuple[str, float], list[dict[str, float]]] = {}
    head = "".join(f"{n:>14}" for n in FIGURES)
    for r in range(args.rounds):
        for rate in rates:
            for tree in args.trees:
                f, ok = run(tree, rate, args.seconds, extra)
                got.setdefault((str(tree), rate), []).append(f)
                print(f"round {r + 1} {rate:g}/s {str(tree):<24}"
                      + "".join(f"{f[n]:14.3f}" for n in FIGURES)
                      + ("" if ok else "   ! correctness or target missed (soak.py exit 1)"),
                      flush=True)
    print(f"\nmedians over {args.rounds} rounds of {args.seconds:g} s{'':<10}{head}")
    for (tree, rate), runs in got.items():
        print(f"  {rate:g}/s {tree:<30}" + "".join(
            f"{statistics.median(x[n] for x in runs):14.3f}" for n in FIGURES))


if __name__ == "__main__":
    main()
