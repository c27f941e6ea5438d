"""The click CLI: help with examples, every command on the commands page, keys shown once,
inspect and resolve."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from support import START_MS

from notifyd.cli import main
from notifyd.config import Config, StoreConfig
from notifyd.core.clock import FakeClock
from notifyd.core.models import ApiKey
from notifyd.engine.ingest import Ingest
from notifyd.store import open_store

COMMANDS = Path(__file__).resolve().parents[2] / "docs" / "commands.md"


def commands(group: click.Group = main, prefix: tuple[str, ...] = ()
             ) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, cmd in sorted(group.commands.items()):
        yield (*prefix, name), cmd
        if isinstance(cmd, click.Group):
            yield from commands(cmd, (*prefix, name))


PATHS = [path for path, _ in commands()]


def run(db: Path, *args: str) -> Result:
    env = {"NOTIFYD_DB": str(db), "NOTIFYD_CONFIG": None}
    return CliRunner().invoke(main, list(args), env=env)


def test_there_are_commands_to_check() -> None:
    assert {("serve",), ("init",), ("keys", "create"), ("inspect",), ("resolve",)} <= set(PATHS)


@pytest.mark.parametrize("path", [(), *PATHS], ids=lambda p: " ".join(p) or "notifyd")
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example:" in result.output


def test_every_command_is_on_the_commands_page() -> None:
    text = COMMANDS.read_text()
    # "notifyd keys create", also with global options between: "notifyd --db x keys create".
    missing = [" ".join(p) for p in PATHS
               if not re.search(rf"\bnotifyd\b[^\n]*\b{' '.join(p)}\b", text)]
    assert missing == [], "commands docs/commands.md does not show"


def test_keys_create_prints_the_key_once_and_stores_only_its_hash(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    assert run(db, "tenants", "create", "acme").exit_code == 0
    result = run(db, "keys", "create", "--name", "billing", "--tenant", "acme",
                 "--kinds", "demo")
    assert result.exit_code == 0, result.output
    key = result.stdout.strip()
    assert key.startswith("nfy_") and "\n" not in key
    assert result.output.count(key) == 1
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("keys.db"))
    assert key.encode() not in stored
    assert hashlib.sha256(key.encode()).hexdigest().encode() in stored

    listed = run(db, "keys", "list")
    assert listed.exit_code == 0
    assert "billing\ttenant=acme\tkinds=demo\tscopes=post,read,resolve,topics,users\tactive" in (
        listed.stdout)
    assert key not in listed.output


def test_keys_list_says_when_each_key_was_made_and_last_used(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    run(db, "keys", "create", "--name", "fresh")
    [line] = run(db, "keys", "list").stdout.splitlines()
    made = line.split("\t")[5]
    assert datetime.fromisoformat(made.removeprefix("created=")).tzinfo is not None, line
    assert line.endswith("\tlast_used=never")


def test_keys_create_warns_when_it_made_a_database_no_config_names(tmp_path: Path) -> None:
    """The daemon, started with its config or elsewhere, would use another database and
    refuse the key; once the database exists, or a config names it, nothing to say."""
    db = tmp_path / "keys.db"
    made = run(db, "keys", "create", "--name", "first")
    assert made.exit_code == 0
    assert f"no database at {db}, so this made a new one" in made.stderr
    assert "warning" not in run(db, "keys", "create", "--name", "second").stderr
    config = tmp_path / "n.toml"
    config.write_text(f'[store]\nurl = "{tmp_path / "other.db"}"\n')
    named = CliRunner().invoke(main, ["keys", "create", "--name", "x"],
                               env={"NOTIFYD_CONFIG": str(config), "NOTIFYD_DB": None})
    assert named.exit_code == 0 and "warning" not in named.stderr


def test_keys_create_refuses_unknown_kinds_and_duplicate_names(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    bad = run(db, "keys", "create", "--name", "x", "--kinds", "nope")
    assert bad.exit_code != 0 and "unknown kind 'nope'" in bad.output
    assert run(db, "keys", "create", "--name", "x").exit_code == 0
    dup = run(db, "keys", "create", "--name", "x")
    assert dup.exit_code != 0 and "exists" in dup.output


def test_keys_revoke(tmp_path: Path) -> None:
    db = tmp_path / "keys.db"
    run(db, "keys", "create", "--name", "old")
    assert run(db, "keys", "revoke", "old").exit_code == 0
    assert "old\ttenant=default\tkinds=*\tscopes=post,read,resolve,topics,users\trevoked" in run(
        db, "keys", "list").stdout
    assert run(db, "keys", "revoke", "old").exit_code != 0


async def _seed(db: Path, user_id: str = "u1") -> str:
    """A 'demo' notification for user_id/inv-1 in tenant default, through the real ingest."""
    cfg = Config(store=StoreConfig(url=str(db)))
    clock = FakeClock(START_MS)
    store = await open_store(str(db), clock)
    try:
        ingest = Ingest(cfg, store, clock)
        body = json.dumps({"user_id": user_id, "kind": "demo", "dedup_key": "inv-1"}).encode()
        inp = ingest.parse(body, ApiKey("billing", "default", (), "h"), None)
        return (await ingest.accept(inp)).notification_id
    finally:
        await store.close()


@pytest.fixture
def seeded(tmp_path: Path) -> tuple[Path, str]:
    db = tmp_path / "cli.db"
    return db, asyncio.run(_seed(db))


@pytest.mark.parametrize("by", ["id", "dedup"])
def test_inspect_prints_the_timeline(seeded: tuple[Path, str], by: str) -> None:
    db, nid = seeded
    result = run(db, "inspect", nid if by == "id" else "u1:inv-1")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{nid}  tenant=default user=u1 kind=demo dedup_key=inv-1")
    text = result.stdout
    assert "accepted from key 'billing': kind demo, 2 steps" in text
    assert "step 0 log: planned for 2026-09-21T14:13:20.000+00:00 (at accept)" in text
    assert ("step 1 log: planned for 2026-09-21T14:13:50.000+00:00 (when step 0's 30 s "
            "window ends)") in text
    assert lines[-1] == "  state now: log_pending"


def test_inspect_json_is_the_status_document(seeded: tuple[Path, str]) -> None:
    db, nid = seeded
    result = run(db, "inspect", "--json", nid)
    doc = json.loads(result.stdout)
    assert doc["notification_id"] == nid and doc["current_state"] == "log_pending"
    assert [s["status"] for s in doc["steps"]] == ["pending", "pending"]


def test_inspect_an_unknown_ref_fails_and_says_what_forms_it_takes(
        seeded: tuple[Path, str]) -> None:
    db, _ = seeded
    assert run(db, "tenants", "create", "other").exit_code == 0
    for ref in ("n_0000000000000000zz", "u1:never", "u1:inv-1 --tenant other"):
        result = run(db, "inspect", *ref.split())
        assert result.exit_code == 1 and "no notification" in result.output
        assert "user_id:dedup_key" in result.output
    bad = run(db, "inspect", "not one")  # no form of REF has a space
    assert bad.exit_code == 1 and "'not one' is not a notification id" in bad.output
    assert "user_id:dedup_key, or an event's id" in bad.output


def test_a_user_id_with_colons_is_split_on_the_last_one(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    nid = asyncio.run(_seed(db, user_id="acme:42"))
    result = run(db, "inspect", "acme:42:inv-1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(nid)
    replayed = run(db, "replay", "acme:42:inv-1")  # the user:dedup form works for replay too
    assert replayed.exit_code == 1 and "no dead or unknown step" in replayed.output


def test_reading_commands_refuse_a_missing_database_and_leave_none_behind(
        tmp_path: Path) -> None:
    db = tmp_path / "nowhere.db"
    for args in (["inspect", "u1:x"], ["dead-letters"], ["keys", "list"],
                 ["keys", "revoke", "k"], ["resolve", "u1:x"], ["replay", "u1:x"]):
        result = run(db, *args)
        assert result.exit_code == 1, args
        assert f"no database at {db}" in result.output, result.output
        assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_writing_commands_say_which_database_they_wrote(tmp_path: Path) -> None:
    db = tmp_path / "made.db"
    made = run(db, "keys", "create", "--name", "k")
    assert made.exit_code == 0 and f"(database {db})" in made.stderr
    assert f"(database {db})" in run(db, "keys", "revoke", "k").stderr


def test_a_relative_store_path_follows_the_config_not_the_current_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "srv").mkdir()
    (tmp_path / "elsewhere").mkdir()
    config = tmp_path / "srv" / "notifyd.toml"
    config.write_text('[store]\npath = "notifyd.db"\n')
    monkeypatch.chdir(tmp_path / "elsewhere")
    made = CliRunner().invoke(main, ["--config", str(config), "keys", "create", "--name", "k"],
                              env={"NOTIFYD_DB": None, "NOTIFYD_CONFIG": None})
    assert made.exit_code == 0, made.output
    assert (tmp_path / "srv" / "notifyd.db").exists()
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_global_options_work_after_the_subcommand_too(tmp_path: Path) -> None:
    db = tmp_path / "g.db"
    env = {"NOTIFYD_DB": None, "NOTIFYD_CONFIG": None}
    assert CliRunner().invoke(main, ["keys", "create", "--db", str(db), "--name", "k"],
                              env=env).exit_code == 0
    listed = CliRunner().invoke(main, ["keys", "list", "--db", str(db)], env=env)
    assert "k\ttenant=default" in listed.output
    config = tmp_path / "n.toml"
    config.write_text("[server]\nport = 1\n")
    shown = CliRunner().invoke(main, ["dead-letters", "--config", str(config), "--db", str(db)],
                               env=env)
    assert shown.exit_code == 0 and "no dead letters" in shown.output


def test_notifyd_alone_prints_help_and_exits_0() -> None:
    result = CliRunner().invoke(main, [])
    assert result.exit_code == 0 and "Commands:" in result.output


def test_init_dash_writes_to_standard_output_and_a_missing_folder_is_one_line(
        tmp_path: Path) -> None:
    out = CliRunner().invoke(main, ["init", "-"])
    assert out.exit_code == 0 and out.output.startswith("# notifyd configuration.")
    missing = CliRunner().invoke(main, ["init", str(tmp_path / "etc" / "notifyd.toml")])
    assert missing.exit_code == 1
    assert missing.output == (f"Error: the folder {tmp_path / 'etc'} does not exist; create it "
                              f"first (mkdir -p {tmp_path / 'etc'})\n")


def test_a_file_that_is_not_a_database_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "notes.txt"
    db.write_text("not a database at all, just text " * 100)
    result = run(db, "keys", "list")
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {db} is not a notifyd database")
    assert "Traceback" not in result.output


def test_resolve_by_id_then_by_dedup_key(seeded: tuple[Path, str]) -> None:
    db, nid = seeded
    first = run(db, "resolve", nid, "--resolution", "confirmed")
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == f"{nid} resolved: confirmed; cancelled 2 steps"
    assert f"(database {db})" in first.stderr
    again = run(db, "resolve", "u1:inv-1", "--resolution", "other")
    assert again.exit_code == 0, again.output
    assert again.stdout.strip() == f"{nid} was already resolved: confirmed"

    text = run(db, "inspect", "u1:inv-1").stdout
    assert "resolved 'confirmed' by cli" in text
    assert run(db, "tenants", "create", "other").exit_code == 0
    missing = run(db, "resolve", "u1:inv-1", "--tenant", "other")
    assert missing.exit_code == 1
    assert "no notification 'u1:inv-1' in tenant 'other' (--tenant)" in missing.output
    unknown = run(db, "resolve", "n_" + "0" * 18)
    assert unknown.exit_code == 1 and f"no notification 'n_{'0' * 18}'; REF is" in unknown.output
    assert "step 0 log: cancelled: resolved: confirmed" in text
    assert text.splitlines()[-1] == "  state now: resolved"


def test_inspect_by_dedup_key_for_a_user_id_starting_like_an_id(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    nid = asyncio.run(_seed(db, user_id="n_ops"))
    result = run(db, "inspect", "n_ops:inv-1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(nid)


def test_tokens_rotate_prints_the_new_key_and_keeps_the_old_for_the_overlap(
        tmp_path: Path) -> None:
    db = tmp_path / "notifyd.db"
    assert run(db, "tenants", "create", "acme").exit_code == 0  # makes the database
    old = run(db, "tokens", "secret", "--tenant", "acme")
    assert old.exit_code == 0, old.output
    rotated = run(db, "tokens", "rotate", "--tenant", "acme", "--overlap", "120")
    assert rotated.exit_code == 0, rotated.output
    new = rotated.stdout.strip()
    assert new != old.stdout.strip() and "the old key verifies tokens until" in rotated.stderr
    assert run(db, "tokens", "secret", "--tenant", "acme").stdout.strip() == new

    async def kept() -> tuple[int, int]:
        store = await open_store(f"sqlite:///{db}", FakeClock(0), create=False)
        try:
            found = await store.find_signing_key("tokens:acme")
        finally:
            await store.close()
        assert found is not None and found.previous_until is not None
        return len(found.verifying(found.previous_until - 1)), len(found.verifying(
            found.previous_until))

    assert asyncio.run(kept()) == (2, 1)


def test_tokens_create_keeps_to_the_longest_a_token_may_live(tmp_path: Path) -> None:
    db = tmp_path / "notifyd.db"
    assert run(db, "keys", "create", "--name", "k").exit_code == 0
    result = run(db, "tokens", "create", "ada", "--ttl", "86401")
    assert result.exit_code != 0 and "--ttl: at most 86400 (tokens.max_ttl_sec)" in result.output
    assert run(db, "tokens", "create", "ada", "--ttl", "86400").stdout.startswith("nut1.")
