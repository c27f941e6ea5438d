"""Putting a backup in place of a SQLite database: the backup checked first, the file it replaces
(with its -wal and -shm, which may hold its last commits) moved aside, never deleted, and the copy
made beside the database and renamed over it, so a crash leaves one or the other, never half."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from pathlib import Path

from notifyd.store.base import StoreUnavailable
from notifyd.store.sqlite.migrate import migrations

SIDECARS = ("-wal", "-shm")


def check_backup(backup: Path) -> int:
    """Refuse a file that is not a whole notifyd database: one line naming what is wrong. The
    notifications it holds."""
    if not backup.is_file():
        raise StoreUnavailable(f"no file at {backup}")
    try:
        conn = sqlite3.connect(f"file:{backup.resolve()}?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise StoreUnavailable(f"{backup} cannot be opened: {e}") from None
    try:
        problems = [" ".join(r[0].split()) for r in conn.execute("PRAGMA integrity_check(3)")]
        if problems != ["ok"]:
            raise StoreUnavailable(f"{backup} is damaged: {'; '.join(problems)}")
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        latest = migrations()[-1][0]
        if not 1 <= version <= latest:
            raise StoreUnavailable(f"{backup} is not a notifyd database this version can use "
                                   f"(schema version {version}; this notifyd knows 1..{latest})")
        return int(conn.execute("SELECT count(*) FROM notifications").fetchone()[0])
    except sqlite3.DatabaseError as e:
        raise StoreUnavailable(f"{backup} is not a notifyd database ({e})") from None
    finally:
        conn.close()


def restore(path: str, backup: Path) -> str | None:
    """Put `backup` at `path`; where the replaced file went (None: there was none). The caller
    holds the database (no daemon runs on it)."""
    target = Path(path).resolve()
    staged = target.with_name(target.name + ".restoring")
    with contextlib.suppress(FileNotFoundError):
        staged.unlink()
    fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # contacts and params
    with os.fdopen(fd, "wb") as out, backup.open("rb") as src:
        shutil.copyfileobj(src, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    aside = None
    if target.exists():
        aside = target.with_name(f"{target.name}.replaced-{time.strftime('%Y%m%dT%H%M%S')}")
        os.rename(target, aside)
        for ext in SIDECARS:
            side = target.with_name(target.name + ext)
            if side.exists():
                os.rename(side, aside.with_name(aside.name + ext))
    os.rename(staged, target)
    folder = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return str(aside) if aside else None
