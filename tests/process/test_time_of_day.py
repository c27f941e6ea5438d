"""The tests that read the time of day from the machine's clock (marked `time_of_day`: quiet
hours, digest schedules, on the real clock or on a fake clock started from it) pass at any hour:
they run again here, in a pytest of their own under libfaketime's `faketime`, at an hour inside
the 22:00-07:00 Europe/Berlin quiet hours the tests set and at one outside them. Every process
they start (the daemon, chromium) inherits the shifted clock; the run checks that it took (the
conftest's `the_clock_reads_the_hour_asked`).

The shift is always forward, less than a day: faketime moves the monotonic clock by the same
constant, which asyncio and uvloop only ever subtract from itself, and which then never reads
below zero (libuv's clock is unsigned). It cannot be left alone: with --exclude-monotonic,
libfaketime 0.9.10 answers Python's time.sleep (clock_nanosleep to a monotonic deadline) EINVAL."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

ROOT = Path(__file__).resolve().parents[2]
ZONE = "Europe/Berlin"
HOURS = {"23:30": "inside the quiet hours", "12:00": "outside them"}


def offset_to(hhmm: str, zone: str, now: float) -> int:
    """Seconds from `now` to the next `hhmm` on `zone`'s wall clock: what faketime adds to the
    real clock."""
    tz = ZoneInfo(zone)
    hour, minute = map(int, hhmm.split(":"))
    wall = datetime.fromtimestamp(now, tz).replace(hour=hour, minute=minute, second=0,
                                                   microsecond=0, tzinfo=None)
    for day in range(2):  # each date's own offset: across a change of the clocks, still hhmm
        at = (wall + timedelta(days=day)).replace(tzinfo=tz).timestamp()
        if at >= now:
            return int(at - now)
    raise AssertionError("unreachable: tomorrow's hhmm is ahead")


def test_the_offset_lands_on_the_hour_on_the_zones_wall_clock() -> None:
    for now in (datetime(2026, 3, 29, 0, 30, tzinfo=ZoneInfo("UTC")).timestamp(),  # CET -> CEST
                datetime(2026, 7, 1, 21, 45, tzinfo=ZoneInfo("UTC")).timestamp()):
        for hhmm in HOURS:
            offset = offset_to(hhmm, ZONE, now)
            assert 0 <= offset < 86400
            assert datetime.fromtimestamp(now + offset, ZoneInfo(ZONE)).strftime("%H:%M") == hhmm


def selection(session: pytest.Session) -> list[str]:
    """Every marked test: by id when this session collected the whole suite (only their modules
    are imported again), else by the mark over every test (collecting them all)."""
    here = session.config.invocation_params.dir
    whole = all((here / arg.split("::")[0]).resolve() in (ROOT, ROOT / "tests")
                for arg in session.config.args)
    ids = [i.nodeid for i in session.items if i.get_closest_marker("time_of_day")]
    return ids if whole and ids else ["-m", "time_of_day", "tests"]


@pytest.mark.parametrize("hhmm", list(HOURS), ids=[f"at {h} {ZONE}" for h in HOURS])
def test_the_time_of_day_tests_pass_at(hhmm: str, request: pytest.FixtureRequest,
                                       tmp_path: Path) -> None:
    faketime = shutil.which("faketime")
    if faketime is None:
        pytest.fail("faketime is missing: apt-get install faketime (README's test command does)")
    offset = offset_to(hhmm, ZONE, time.time())
    env = {**os.environ, "NOTIFYD_TEST_WALL_CLOCK": f"{hhmm} {ZONE}"}
    done = subprocess.run(
        [faketime, "-m", "-f", f"+{offset}", sys.executable, "-m",
         "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'runs'}",
         *selection(request.session)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode == 0, f"at {hhmm} {ZONE} ({HOURS[hhmm]}):\n{said[-6000:]}"
    summary = said.strip().splitlines()[-1]
    assert " passed" in summary and "skipped" not in summary, summary
