"""Upgrades keep the rows' word: a database whose digests carried items while a carried step
still said `held` has them say `digested` once migrated, dated when their digest was made, on
every backend; an item still waiting for its digest stays `held`."""

from __future__ import annotations

import dataclasses
import hashlib
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from store_support import BACKENDS, NOW, RULES, accept, carry, claim, opened

from notifyd.core.clock import FakeClock
from notifyd.core.contacts import SUPPRESSION_KEY, hashed_address
from notifyd.core.models import Decision, Recipient, StepState, Verdict
from notifyd.store import is_postgres
from notifyd.store.postgres import migrate as pg_migrate
from notifyd.store.postgres.backend import connect
from notifyd.store.sqlite import migrate as sqlite_migrate

AS_BEFORE = "UPDATE steps SET state = 'held', updated_at = 0 WHERE state = 'digested'"


def _digested_migration(migrations: list[tuple[int, str]]) -> int:
    return next(n for n, sql in migrations if "SET state = 'digested'" in sql)


def _as_before(url: str) -> None:
    """The rows as a database from before that migration holds them, and its version."""
    if is_postgres(url):
        version = _digested_migration(pg_migrate.migrations())
        with connect(url) as conn:
            conn.execute(AS_BEFORE)
            conn.execute("DELETE FROM notifyd_migrations WHERE version >= $1", (version,))
        return
    version = _digested_migration(sqlite_migrate.migrations())
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        conn.execute(AS_BEFORE)
        conn.execute(f"PRAGMA user_version = {version - 1}")
        conn.commit()


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_items_carried_before_the_upgrade_say_digested_after_it(
        backend: str, tmp_path: Path) -> None:
    url, clock = BACKENDS[backend](tmp_path, "upgrade.db"), FakeClock(NOW)
    async with opened(url, clock) as store:
        window = await carry(store, clock, "n_0", "n_1")
        await accept(store, "n_2", "a")  # held for the next window: not carried yet
        hold = Decision(Verdict.HOLD, "held", until=window + 3_600_000, digest="daily")
        assert await claim(store, rules=dataclasses.replace(RULES, decide=lambda c, n: hold)) == []
    _as_before(url)
    async with opened(url, clock) as store:  # opening migrates
        for nid, state, updated_at in (("n_0", StepState.DIGESTED, window),
                                       ("n_1", StepState.DIGESTED, window),
                                       ("n_2", StepState.HELD, window)):
            n = await store.get_notification(nid)
            assert n is not None
            [s] = n.steps
            assert (s.state, s.digest_id, s.updated_at) == (
                state, "n_d" if state is StepState.DIGESTED else None, updated_at), nid


def _unkeyed(url: str, address: str) -> None:
    """The suppressions as a database from before the installation's key holds them: an
    erased person's address as its bare SHA-256, no key, at the version before that migration."""
    old = "sha256:" + hashlib.sha256(address.encode()).hexdigest()
    if is_postgres(url):
        with connect(url) as conn:
            conn.execute("DELETE FROM signing_keys WHERE name = 'suppressions'")
            conn.execute("INSERT INTO suppressions VALUES ('acme', 'sms', $1, 'stop', 'twilio', "
                         "NULL, 0)", (old,))
            conn.execute("DELETE FROM notifyd_migrations WHERE version >= $1",
                         (pg_migrate.KEY_SUPPRESSIONS,))
        return
    with closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as conn:
        conn.execute("DELETE FROM signing_keys WHERE name = 'suppressions'")
        conn.execute("INSERT INTO suppressions VALUES ('acme', 'sms', ?, 'stop', 'twilio', "
                      "NULL, 0)", (old,))
        conn.execute(f"PRAGMA user_version = {sqlite_migrate.KEY_SUPPRESSIONS - 1}")
        conn.commit()


@pytest.mark.parametrize("backend", sorted(BACKENDS))
async def test_suppressions_hashed_before_the_key_are_rehashed_under_it(
        backend: str, tmp_path: Path) -> None:
    url, phone = BACKENDS[backend](tmp_path, "upgrade.db"), "+14155550100"
    _unkeyed(url, phone)
    async with opened(url, FakeClock(NOW)) as store:  # opening migrates
        key = await store.find_signing_key(SUPPRESSION_KEY)
        assert key is not None and len(key.secret) == 32
        [kept] = await store.suppressions("acme")
        assert kept.address == hashed_address(phone, key.secret)  # without the number
        assert [s.address for s in await store.suppressions("acme", phone)] == [kept.address]
        await store.put_recipient(Recipient("acme", "u1", contacts={"phone": phone}))
        r = await store.get_recipient("acme", "u1")
        assert r is not None and [(d.contact, d.reason) for d in r.disabled] == [("phone", "stop")]
