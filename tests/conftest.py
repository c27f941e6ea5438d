"""Fixtures: a real SQLite file in tmp_path, a fake clock, the test config, the in-process API."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pg_support
import pytest
from aiohttp.test_utils import TestClient, TestServer
from engine_support import ENV_PREFIXES, Daemon, clean_env
from store_support import fresh_sqlite
from support import START_MS, Api, make_config

from notifyd.config import PROXY_VARIABLES, Config
from notifyd.core.clock import FakeClock
from notifyd.engine.ingest import Ingest
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache
from notifyd.http.kit import Context
from notifyd.store import open_store, sqlite_path
from notifyd.store.core.store import CoreStore

# "HH:MM Zone" in a run under faketime (tests/process/test_time_of_day.py): the hour it shifted
# the wall clock to. Read before no_config_from_the_shell clears NOTIFYD_ variables.
WALL_CLOCK = os.environ.get("NOTIFYD_TEST_WALL_CLOCK")
# The wall clock on a zone as time.time and datetime.now read it: "HH:MM HH:MM".
READ_THE_HOUR = ("import datetime as d, sys, time, zoneinfo as z; tz = z.ZoneInfo(sys.argv[1]); "
                 "print(d.datetime.fromtimestamp(time.time(), tz).strftime('%H:%M'), "
                 "d.datetime.now(tz).strftime('%H:%M'))")


@pytest.fixture(autouse=True, scope="session")
def the_clock_reads_the_hour_asked() -> None:
    """Under faketime, the shift took, in the tests' process and in one started as the daemon
    is (the environment carries it): time.time and datetime.now read the hour asked, give or
    take the minutes the run takes. A run whose clock did not move would prove nothing."""
    if not WALL_CLOCK:
        return
    hhmm, zone = WALL_CLOCK.split()
    tz = ZoneInfo(zone)
    reads = [datetime.fromtimestamp(time.time(), tz).strftime("%H:%M"),
             datetime.now(tz).strftime("%H:%M")]
    reads += subprocess.run([sys.executable, "-c", READ_THE_HOUR, zone], env=clean_env(),
                            capture_output=True, text=True, timeout=60,
                            check=True).stdout.split()
    asked = int(hhmm[:2]) * 60 + int(hhmm[3:])
    for read in reads:
        late = (int(read[:2]) * 60 + int(read[3:]) - asked) % 1440
        assert late <= 15, f"the clock reads {read} on {zone}, not {hhmm}: {reads}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Once a test's fixtures are down (its stores closed, its daemons stopped), the
    PostgreSQL schemas it was handed for its folder can be handed to another test."""
    folder = getattr(item, "funcargs", {}).get("tmp_path")
    yield
    if isinstance(folder, Path):
        pg_support.release(folder)


@pytest.fixture(autouse=True)
def no_daemon_outlives_its_test() -> Iterator[None]:
    """A test that fails before stopping its `notifyd serve` must not leave it running (a
    module's shared daemon, started before this, is its fixture's to stop)."""
    before = len(Daemon.STARTED)
    yield
    while len(Daemon.STARTED) > before:
        d = Daemon.STARTED.pop()
        if d.proc.poll() is None:
            d.proc.kill()
            d.proc.wait(timeout=30)


@pytest.fixture(autouse=True)
def no_config_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """The config a test loads is the one it writes: none of the shell's NOTIFYD_ variables or
    proxies (load_config lays them over every file)."""
    for name in os.environ:
        if name.startswith(ENV_PREFIXES) or name.lower() in PROXY_VARIABLES:
            monkeypatch.delenv(name)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "notifyd.db"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START_MS)


@pytest.fixture
def cfg(db_path: Path) -> Config:
    return make_config(db_path)


@pytest.fixture
async def store(cfg: Config, clock: FakeClock) -> AsyncIterator[CoreStore]:
    where = sqlite_path(cfg.store.url)
    if where is not None:  # a migrated copy, as the store would have made it
        fresh_sqlite(Path(where).parent, Path(where).name)
    s = await open_store(cfg.store.url, clock, sqlite=cfg.store.sqlite)
    assert isinstance(s, CoreStore)
    yield s
    await s.close()


@pytest.fixture
async def api(cfg: Config, store: CoreStore, clock: FakeClock,
              db_path: Path) -> AsyncIterator[Api]:
    """The real app over the real store, with a key for tenant 'acme' that may post every kind."""
    ctx = Context(cfg, Ingest(cfg, store, clock), KeyCache(store, clock), clock)
    async with TestClient(TestServer(make_app(ctx))) as client:
        a = Api(client, store, clock, db_path)
        a.key = await a.new_key()
        # A key's first use is written (for keys list): now, not amid a test's count of commits.
        await a.get("/v1/users/warm-up")
        await ctx.keys.settle()
        yield a
