"""A sick disk and a hostile neighbour: storage faults answer 503 storage_unavailable and recover
without a restart, a deleted database is noticed at once, a flood is shed with 503 overloaded,
files are private, and the lock file cannot be used to clobber another file.

The disk-full test runs the real daemon under a file-size limit (RLIMIT_FSIZE: writes past it
fail with EFBIG, which SQLite reports as a full disk) and lifts the limit from outside with
prlimit, as freeing space would."""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import stat
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from engine_support import Daemon, clean_env, create_key, notifyd_cmd, query
from support import make_config

from notifyd.core.clock import FakeClock
from notifyd.core.models import ApiKey
from notifyd.engine.ingest import Ingest
from notifyd.store import Overloaded, open_store

KEY = ApiKey("k", "acme", (), "h")


def post(url: str, key: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    request = urllib.request.Request(f"{url}/v1/notifications", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {key}",
                                              "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, json.loads(resp.read()), dict(resp.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_full_disk_is_503_then_recovers_without_a_restart_losing_nothing(
        tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    key = create_key(db)
    limit = 1 << 20
    d = Daemon(db, preexec=lambda: resource.setrlimit(resource.RLIMIT_FSIZE,
                                                      (limit, resource.RLIM_INFINITY)))
    accepted: list[str] = []
    try:
        for i in range(20_000):  # bounded: until the disk is full
            status, body, headers = post(d.url, key, {"user_id": f"u{i}", "kind": "demo",
                                                       "dedup_key": f"d{i}"})
            if status != 202:
                break
            accepted.append(body["notification_id"])
        assert (status, body["error"]["code"]) == (503, "storage_unavailable"), body
        assert headers["Retry-After"] == "5"
        for i in range(50):  # more tries: one log line, no tracebacks (and, as on a real full
            status, body, _ = post(d.url, key, {"user_id": f"x{i}", "kind": "demo"})  # disk,
            assert status in (202, 503)  # a write small enough to fit may still go through)
            if status == 202:
                accepted.append(body["notification_id"])
        for i in range(100):  # readiness right after a refusal (an accept that fits clears it)
            status, body, _ = post(d.url, key, {"user_id": f"y{i}", "kind": "demo"})
            if status == 503:
                break
            accepted.append(body["notification_id"])
        status, ready = get(f"{d.url}/readyz")
        assert status == 503 and ready["checks"]["store"].startswith("cannot write: ")

        inf = resource.RLIM_INFINITY
        resource.prlimit(d.proc.pid, resource.RLIMIT_FSIZE, (inf, inf))  # space returns
        status, body, _ = post(d.url, key, {"user_id": "after", "kind": "demo"})
        assert status == 202, body
        accepted.append(body["notification_id"])
        assert get(f"{d.url}/readyz")[0] == 200
    finally:
        assert d.stop() == 0, d.stderr()
    log = d.stderr()
    assert "Traceback" not in log
    assert 1 <= log.count("storage unavailable: ") <= 3, log
    stored = {r[0] for r in query(db, "SELECT id FROM notifications")}
    assert set(accepted) <= stored and len(accepted) > 10


def test_a_deleted_database_folder_is_noticed_and_nothing_more_is_acknowledged(
        tmp_path: Path) -> None:
    folder = tmp_path / "state"
    folder.mkdir()
    db = folder / "n.db"
    key = create_key(db)
    d = Daemon(db)
    try:
        assert post(d.url, key, {"user_id": "u1", "kind": "demo"})[0] == 202
        shutil.rmtree(folder)
        status, body, _ = post(d.url, key, {"user_id": "u2", "kind": "demo"})
        assert (status, body["error"]["code"]) == (503, "storage_unavailable")
        assert "was deleted or replaced" in body["error"]["message"]
        status, ready = get(f"{d.url}/readyz")
        assert status == 503 and "deleted or replaced" in ready["checks"]["store"]
    finally:
        d.stop()
    assert "CRITICAL" in d.stderr() and "restart notifyd" in d.stderr()


async def test_past_the_bound_accepts_are_refused_at_once_not_queued(tmp_path: Path) -> None:
    cfg = make_config(tmp_path / "n.db")
    store = await open_store(cfg.store.url, max_pending_writes=8)
    try:
        ingest = Ingest(cfg, store, FakeClock())
        bodies = [json.dumps({"user_id": f"u{i}", "kind": "alert"}).encode() for i in range(200)]
        results = await asyncio.gather(*(ingest.accept(ingest.parse(b, KEY, None))
                                         for b in bodies), return_exceptions=True)
        refused = [r for r in results if isinstance(r, Overloaded)]
        created = [r for r in results if not isinstance(r, BaseException)]
        assert refused and created and len(refused) + len(created) == 200
        assert query(tmp_path / "n.db", "SELECT count(*) FROM notifications") == [
            (len(created),)]
    finally:
        await store.close()


def test_the_database_is_private_whatever_the_umask(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    old = os.umask(0o022)
    try:
        create_key(db)
        d = Daemon(db)
        d.stop()
    finally:
        os.umask(old)
    for p in tmp_path.iterdir():
        if p.name.startswith("n.db"):
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p.name
    os.chmod(db, 0o644)
    d = Daemon(db)
    d.stop()
    assert "can be read by other users (mode 644)" in d.stderr()


def test_the_lock_file_never_follows_a_symlink_or_truncates(tmp_path: Path) -> None:
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me")
    db = tmp_path / "n.db"
    os.symlink(victim, tmp_path / "n.db.lock")
    done = subprocess.run(notifyd_cmd(db, "serve", "--port", "0"), capture_output=True,
                          text=True, env=clean_env(), cwd=tmp_path, timeout=60)
    assert done.returncode == 1 and "cannot open the lock file" in done.stderr
    assert victim.read_text() == "keep me"


@pytest.fixture(autouse=True)
def _no_leftover_limits() -> None:
    assert resource.getrlimit(resource.RLIMIT_FSIZE)[0] == resource.RLIM_INFINITY


async def _filled(db: Path, n: int) -> None:
    store = await open_store(str(db))
    try:
        ingest = Ingest(make_config(db), store, FakeClock())
        await asyncio.gather(*(ingest.accept(ingest.parse(json.dumps(
            {"user_id": f"u{i}", "kind": "alert", "params": {"pad": "x" * 200}}).encode(),
            KEY, None)) for i in range(n)))
    finally:
        await store.close()


async def test_damage_in_the_middle_stops_the_start_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    await _filled(db, 2000)
    size = db.stat().st_size
    with open(db, "r+b") as f:  # scribble over pages in the middle of the file
        f.seek(size // 2 // 4096 * 4096)
        f.write(os.urandom(3 * 4096))
    done = await asyncio.to_thread(subprocess.run, notifyd_cmd(db, "serve", "--port", "0"),
                                   capture_output=True, text=True, env=clean_env(),
                                   cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stderr
    assert "listening" not in done.stderr and "Traceback" not in done.stderr
    [line] = [ln for ln in done.stderr.splitlines() if ln.startswith("Error: ")]
    assert f"{db} is not a notifyd database or is damaged" in line
    assert "notifyd backup" in line and "to restore" in line


async def test_a_backup_beside_the_running_daemon_is_a_whole_private_copy(
        tmp_path: Path) -> None:
    db = tmp_path / "n.db"
    await _filled(db, 300)
    d = await asyncio.to_thread(Daemon, db)
    try:
        copy = tmp_path / "copy.db"
        done = await asyncio.to_thread(
            subprocess.run, notifyd_cmd(db, "backup", str(copy)), capture_output=True,
            text=True, env=clean_env(), cwd=tmp_path, timeout=60)
        assert done.returncode == 0, done.stderr
        assert query(copy, "SELECT count(*) FROM notifications") == [(300,)]
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
        again = await asyncio.to_thread(
            subprocess.run, notifyd_cmd(db, "backup", str(copy)), capture_output=True,
            text=True, env=clean_env(), cwd=tmp_path, timeout=60)
        assert again.returncode == 1 and "exists; choose a new file" in again.stderr
    finally:
        assert await asyncio.to_thread(d.stop) == 0
