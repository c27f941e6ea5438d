"""What the daemon costs while nothing happens, and what it wakes for: its CPU per second and each
thread's wake-ups, counted by the kernel, and with --strace the system calls behind them.

Run:   .venv/bin/python benchmarks/idle.py --seconds 30            (a daemon of this tree, idle)
       .venv/bin/python benchmarks/idle.py --pid PID --seconds 20 --per 400 --strace
                           (a running daemon, soak.py's say: each figure also per notification)
The idle daemon is benchmarks/soak.py's (its config, one webhook channel to
benchmarks/provider.py), started from this tree and left --warmup seconds (10) before the timed
phase. Per thread: CPU ms/s (the kernel's schedstat, in ns) and voluntary context switches per
second (each one a sleep that ended: a wake-up), the main thread being the event loop. --strace
attaches `strace -f` over the phase and counts each thread's system calls: on the event loop,
epoll_wait returns are its turns, write()s to the self-pipe or eventfd the wake-ups asked of it;
fdatasync/fsync the commits. strace slows what it watches: take CPU from a run without it. The
machine may be shared: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from channels import stop_proc  # noqa: E402
from receipts import STARTED, Daemon, loadavg, notifyd_cli  # noqa: E402
from soak import CONFIG, KIND, WINDOW_SEC, Receiver, thread_names  # noqa: E402

SYSCALL = re.compile(r"^(\d+)\s+(?:<\.\.\. )?(\w+)")


def sample(pid: int) -> dict[int, tuple[str, float, int]]:
    """Each live thread's comm, CPU seconds so far (schedstat's, in ns: the clock ticks of
    /proc/PID/stat are too coarse for an idle daemon) and voluntary context switches."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        base = f"/proc/{pid}/task/{tid}"
        try:
            text = Path(f"{base}/status").read_text()
            ran = int(Path(f"{base}/schedstat").read_text().split()[0]) / 1e9
            comm = Path(f"{base}/comm").read_text().strip()
        except (OSError, ValueError, IndexError):
            continue
        m = re.search(r"^voluntary_ctxt_switches:\s+(\d+)", text, re.M)
        out[int(tid)] = (comm, ran, int(m.group(1)) if m else 0)
    return out


def measure(pid: int, seconds: float, per: int, trace: bool, work: Path) -> None:
    names = thread_names(pid, blocking=False)
    tracer = None
    out = work / "strace.txt"
    if trace:
        exe = shutil.which("strace")
        if exe is None:
            raise SystemExit("--strace: strace not found")
        tracer = subprocess.Popen([exe, "-f", "-qq", "-o", str(out), "-p", str(pid)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        STARTED.append(tracer)
        time.sleep(1.0)  # attached to every thread
    s0, t0 = sample(pid), time.monotonic()
    time.sleep(seconds)
    s1, wall = sample(pid), time.monotonic() - t0
    if tracer is not None:
        tracer.send_signal(2)
        tracer.wait(30)
    main = pid
    before = {t: s0.get(t, (c, 0.0, 0)) for t, (c, _, _) in s1.items()}
    total = sum(s1[t][1] - before[t][1] for t in s1)
    unit = f", {total / per * 1000:.3f} ms per notification" if per else ""
    print(f"daemon pid {pid}: {total * 1000 / wall:.1f} ms CPU per second over {wall:.1f} s{unit}; "
          f"load average {loadavg()}")
    for tid in sorted(s1, key=lambda t: before[t][1] - s1[t][1]):
        used, woke = s1[tid][1] - before[tid][1], s1[tid][2] - before[tid][2]
        if used < 0.0001 and woke == 0:
            continue
        name = names.get(tid, s1[tid][0]) + (" (event loop)" if tid == main else "")
        each = f"; per notification {used / per * 1000:.3f} ms, {woke / per:.2f} wake-ups" if per else ""
        print(f"  {tid} {name}: {used * 1000 / wall:.1f} ms/s, {woke / wall:.1f} wake-ups/s{each}")
    if tracer is not None:
        calls: dict[int, Counter[str]] = {}
        for line in out.read_text(errors="replace").splitlines():
            m = SYSCALL.match(line)
            if m and "resumed>" not in line:
                calls.setdefault(int(m.group(1)), Counter())[m.group(2)] += 1
        span = wall + 1.0
        print(f"  system calls over ~{span:.0f} s (strace attached"
              + (f"; per notification over {per}" if per else "; per second") + "):")
        for tid, c in sorted(calls.items(), key=lambda kv: -sum(kv[1].values())):
            name = names.get(tid, s1.get(tid, ("?",))[0]) + (" (event loop)" if tid == main else "")
            div = per if per else span
            print(f"    {tid} {name}: " + ", ".join(f"{k} {v / div:.2f}" for k, v in c.most_common(8)))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--warmup", type=float, default=10)
    ap.add_argument("--pid", type=int, help="measure this running daemon instead of an idle one")
    ap.add_argument("--per", type=int, default=0, help="notifications in the phase, to divide by")
    ap.add_argument("--strace", action="store_true", help="count system calls per thread")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="notifyd-idle-"))
    try:
        if args.pid:
            measure(args.pid, args.seconds, args.per, args.strace, work)
            return
        receiver = Receiver()
        cfg = work / "notifyd.toml"
        cfg.write_text(CONFIG.format(db=work / "notifyd.db", event_loop="auto",
                                     receiver=receiver.port, kind=KIND, w=WINDOW_SEC,
                                     concurrency=64))
        notifyd_cli(cfg, "keys", "create", "--name", "idle")
        daemon = Daemon(cfg, work)
        print(f"daemon from {HERE.parent}, idle for {args.warmup:g} s first")
        time.sleep(args.warmup)
        measure(daemon.pid, args.seconds, 0, args.strace, work)
        daemon.stop()
    finally:
        for proc in reversed(STARTED):
            stop_proc(proc, 15)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
