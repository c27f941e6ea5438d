"""The database's upkeep from the command line: prune (and its dry run), vacuum, restore."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import closing
from pathlib import Path

from click.testing import CliRunner, Result
from test_cli import _seed

from notifyd.cli import main
from notifyd.store import hold


def run(db: Path, *args: str, config: Path | None = None) -> Result:
    env = {"NOTIFYD_DB": str(db), "NOTIFYD_CONFIG": str(config) if config else None}
    return CliRunner().invoke(main, list(args), env=env)


def test_prune_counts_then_removes_and_inspect_says_what_is_left(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    nid = asyncio.run(_seed(db))  # accepted weeks before today, its steps still pending
    config = tmp_path / "n.toml"
    config.write_text("[retention]\nhistory_sec = 86400\nidentity_sec = 31536000\n")
    dry = run(db, "prune", "--dry-run", config=config)
    assert dry.exit_code == 0, dry.output
    assert "history of finished notifications (notifications)    older than 1 day: 0 would " \
           "go" in dry.output  # open: kept, however old
    assert run(db, "resolve", nid).exit_code == 0
    dry = run(db, "prune", "--dry-run", config=config)
    assert "older than 1 day: 1 would go" in dry.output
    assert "identities left by pruned histories" in dry.output
    assert "database: " in dry.output and " MiB free inside" in dry.output
    done = run(db, "prune", config=config)
    assert done.exit_code == 0, done.output
    assert "older than 1 day: 1 removed" in done.output
    assert run(db, "prune", "--dry-run", config=config).output.count(" 0 would go") == 7
    shown = run(db, "inspect", "u1:inv-1")
    assert shown.exit_code == 0, shown.output
    assert "history pruned (retention)" in shown.output and "(resolved)" in shown.output
    assert shown.output.splitlines()[-1] == "  state now: resolved"


def test_vacuum_gives_free_pages_back(tmp_path: Path) -> None:
    db = tmp_path / "v.db"
    asyncio.run(_seed(db))
    with closing(sqlite3.connect(db)) as conn:  # room made inside the file
        conn.execute("CREATE TABLE filler (x)")
        conn.executemany("INSERT INTO filler VALUES (?)", [("x" * 4000,)] * 500)
        conn.commit()
        conn.execute("DROP TABLE filler")
        conn.commit()
    result = run(db, "vacuum")
    assert result.exit_code == 0, result.output
    before, after = (float(x.split()[0]) for x in result.stdout.split(": ")[1].split(" -> "))
    assert after < before - 1
    assert run(db, "vacuum", "--full").exit_code == 0


def test_restore_puts_a_backup_in_place_and_keeps_the_replaced_file(tmp_path: Path) -> None:
    db, copy = tmp_path / "live.db", tmp_path / "copy.db"
    asyncio.run(_seed(db, "before"))
    assert run(db, "backup", str(copy)).exit_code == 0
    asyncio.run(_seed(db, "after"))
    result = run(db, "restore", str(copy))
    assert result.exit_code == 0, result.output
    assert f"restored {db} from {copy} (1 notification)" in result.output
    aside = [p for p in tmp_path.iterdir() if p.name.startswith("live.db.replaced-")]
    assert aside and f"the database it replaced is at {aside[0]}" in result.output
    assert run(db, "inspect", "before:inv-1").exit_code == 0
    assert run(db, "inspect", "after:inv-1").exit_code != 0
    assert oct(db.stat().st_mode & 0o777) == "0o600"


def test_restore_refuses_a_bad_backup_and_a_running_daemon_and_changes_nothing(
        tmp_path: Path) -> None:
    db, junk = tmp_path / "live.db", tmp_path / "junk.db"
    asyncio.run(_seed(db))
    junk.write_bytes(b"not a database" * 100)
    bad = run(db, "restore", str(junk))
    assert bad.exit_code != 0
    assert bad.output.strip().startswith(f"Error: not restored: {junk} is not a notifyd database")
    assert run(db, "restore", str(tmp_path / "missing.db")).exit_code != 0
    held = hold(str(db))
    try:
        busy = run(db, "restore", str(db))
        assert busy.exit_code != 0 and "a notifyd daemon is running on" in busy.output
        assert "needs the daemon stopped" in run(db, "vacuum", "--full").output
    finally:
        assert held is not None
        held.release()
    assert not any(".replaced-" in p.name or ".restoring" in p.name for p in tmp_path.iterdir())
    assert run(db, "inspect", "u1:inv-1").exit_code == 0
