"""The cluster acceptance run, small: two `notifyd serve` processes on one PostgreSQL database,
300 ladders with random resolutions and receipts, the first killed with SIGKILL half-way and
started again; benchmarks/cluster.py checks the rows and the provider's log and exits non-zero on
any violation (a step under two keys, an attempt after its resolution, a step early, a
notification unfinished)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pg_support
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "cluster.py"


@pytest.mark.skipif(pg_support.SERVER == "off", reason="no PostgreSQL for this run")
def test_two_daemons_one_killed_half_way_keep_every_promise() -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--n", "300", "--deadline", "120",
                           "--server", pg_support.SERVER], capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("ok")
