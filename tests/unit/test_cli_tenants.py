"""Tenants are made on purpose (`notifyd tenants create`), and every command that names one
refuses a tenant the database does not have: a typo never makes a tenant, a key or a user-token
key. A database from before tenants were kept knows every tenant it already names."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from notifyd.cli import main
from notifyd.store.sqlite.migrate import _statements, migrations

TYPO = "no tenant 'acmee' (tenants: acme, default); if it is a new one, make it first: " \
       "notifyd tenants create acmee"


def run(db: Path, *args: str, config: Path | None = None) -> Result:
    env = {"NOTIFYD_DB": str(db), "NOTIFYD_CONFIG": str(config) if config else None}
    return CliRunner().invoke(main, list(args), env=env)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "n.db"
    made = run(path, "tenants", "create", "acme")
    assert made.exit_code == 0, made.output
    assert "tenant 'acme' created" in made.stdout
    return path


def tables(db: Path, sql: str) -> list[tuple[object, ...]]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql).fetchall()


@pytest.mark.parametrize("args", [
    ("keys", "create", "--name", "k", "--tenant", "acmee"),
    ("tokens", "secret", "--tenant", "acmee"),
    ("tokens", "rotate", "--tenant", "acmee"),
    ("tokens", "create", "ada", "--tenant", "acmee"),
    ("suppressions", "list", "--tenant", "acmee"),
    ("suppressions", "add", "email", "ada@example.com", "--tenant", "acmee"),
    ("suppressions", "remove", "email", "ada@example.com", "--tenant", "acmee"),
    ("inspect", "ada:invoice-1", "--tenant", "acmee"),
    ("resolve", "ada:invoice-1", "--tenant", "acmee"),
])
def test_a_command_naming_an_unknown_tenant_says_so_and_makes_nothing(
        db: Path, args: tuple[str, ...]) -> None:
    result = run(db, *args)
    assert result.exit_code == 1
    assert TYPO in result.output and "Traceback" not in result.output
    assert tables(db, "SELECT name FROM tenants ORDER BY name") == [("acme",), ("default",)]
    assert tables(db, "SELECT count(*) FROM api_keys") == [(0,)]
    assert tables(db, "SELECT count(*) FROM signing_keys WHERE name != 'suppressions'") == [
        (0,)]  # the installation's suppression key is the migrations
    assert tables(db, "SELECT count(*) FROM suppressions") == [(0,)]


def test_a_tenant_that_was_made_works_and_every_tenant_is_starred_for_suppressions(
        db: Path) -> None:
    assert run(db, "keys", "create", "--name", "k", "--tenant", "acme").exit_code == 0
    assert run(db, "tokens", "secret", "--tenant", "acme").exit_code == 0
    assert run(db, "keys", "create", "--name", "d").exit_code == 0  # the default tenant
    added = run(db, "suppressions", "add", "sms", "+14155550123", "--tenant", "*")
    assert added.exit_code == 0, added.output
    assert run(db, "inspect", "n_0000000000000000zz", "--tenant", "acmee").exit_code == 1
    assert "no notification 'n_0000000000000000zz'" in run(
        db, "inspect", "n_0000000000000000zz", "--tenant", "acmee").output  # an id: any tenant


def test_tenants_create_refuses_a_taken_or_malformed_name(db: Path) -> None:
    again = run(db, "tenants", "create", "acme")
    assert (again.exit_code, "a tenant named 'acme' exists" in again.output) == (1, True)
    bad = run(db, "tenants", "create", "Acme Corp")
    assert (bad.exit_code, "lower-case letters" in bad.output) == (1, True)
    assert run(db, "tenants", "create", "*").exit_code == 1


def test_tenants_list_shows_what_each_has_and_config_tables_naming_none(
        db: Path, tmp_path: Path) -> None:
    config = tmp_path / "notifyd.toml"
    config.write_text('[tenants.acme]\ncors_origins = ["https://app.acme.example"]\n'
                      '[tenants.globex]\ncors_origins = ["https://globex.example"]\n')
    run(db, "keys", "create", "--name", "k", "--tenant", "acme")
    run(db, "tokens", "secret", "--tenant", "acme")
    listed = run(db, "tenants", "list", config=config)
    assert listed.exit_code == 0, listed.output
    lines = listed.stdout.splitlines()
    assert [line.split("\t")[0] for line in lines] == ["acme", "default", "globex"]
    acme = lines[0].split("\t")
    assert acme[2:] == ["keys=1", "user_tokens=yes", "cors_origins=https://app.acme.example"]
    assert lines[1].split("\t")[2:] == ["keys=0", "user_tokens=no", "cors_origins=-"]
    assert "not created: the config has [tenants.globex] (notifyd tenants create globex)" in \
        lines[2]


def test_a_database_from_before_knows_every_tenant_it_names(tmp_path: Path) -> None:
    """Migrating keeps what worked working: the tenants of its keys, user-token keys, people
    and suppressions exist, and so does the default one."""
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn:
        tenants = next(n for n, sql in migrations() if "CREATE TABLE tenants" in sql)
        for number, sql in migrations():
            if number < tenants:
                for statement in _statements(sql):
                    conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {tenants - 1}")
        conn.executescript("""
            INSERT INTO api_keys (key_hash, name, tenant, kinds, created_at)
                VALUES ('h', 'k', 'acme', '', 5);
            INSERT INTO signing_keys (name, secret, created_at) VALUES ('tokens:globex', x'00', 6);
            INSERT INTO signing_keys (name, secret, created_at) VALUES ('links', x'00', 6);
            INSERT INTO recipients (tenant, user_id, contacts, updated_at)
                VALUES ('initech', 'u', '{}', 7);
            INSERT INTO suppressions (tenant, channel_type, address, reason, source, created_at)
                VALUES ('*', 'sms', '+1', 'stop', 'twilio', 8);
            """)
        conn.commit()
    listed = run(path, "tenants", "list")
    assert listed.exit_code == 0, listed.output
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [r[0] for r in rows] == ["acme", "default", "globex", "initech"]
    assert (rows[0][1], rows[2][1]) == ("created=1970-01-01T00:00:00.005+00:00",
                                        "created=1970-01-01T00:00:00.006+00:00")
