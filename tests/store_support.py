"""What the store contract suites share: the backends they run against, and small builders.

A backend is a URL factory: the suites open it with `open_store`, twice where they race two
instances over one database (two processes would do the same). PostgreSQL joins by adding its
factory to BACKENDS; nothing else here names a backend.

A new SQLite database is a copy of one the store made and migrated once in this process
(`fresh_sqlite`): 17 migrations, each its own fsynced commit, cost 20-120 ms a test where a
copy costs under 5 ms; PostgreSQL's schemas are made likewise (pg_support.migrated_url). The
migrations themselves are tested on new files and schemas (test_store.py,
test_store_postgres.py), and the copies against what they stand for (test_fresh_databases.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

import pg_support

from notifyd.core.catalog import Catalog, ChannelInfo, KindRules, LimitRule
from notifyd.core.clock import Clock, FakeClock
from notifyd.core.contacts import EMAIL
from notifyd.core.models import (
    AcceptInput,
    Claim,
    Decision,
    Lane,
    PlanFn,
    PlannedStep,
    Recipient,
    Rules,
    Verdict,
    Want,
)
from notifyd.core.records import InboxEntry
from notifyd.core.steps import StepKey
from notifyd.domain import policy
from notifyd.store import Store, open_store

_template: bytes | None = None


def _migrated() -> bytes:
    """A new database as the store makes it (auto_vacuum, WAL, every migration), closed."""
    global _template
    if _template is None:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "template.db"

            async def make() -> None:
                await (await open_store(f"sqlite:///{path}")).close()

            with ThreadPoolExecutor(1) as thread:  # callers may be inside a running loop
                thread.submit(asyncio.run, make()).result()
            assert not Path(f"{path}-wal").exists(), "the template's WAL outlived its close"
            _template = path.read_bytes()
    return _template


def fresh_sqlite(folder: Path, name: str) -> str:
    """The URL of a new, migrated SQLite file of that name in `folder`, readable by its owner
    alone as the store makes one; one already there is left as it is (a restart's)."""
    path = folder / name
    if not path.exists():
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(_migrated())
    return f"sqlite:///{path}"


# A backend: (a test's folder, a database name) -> the URL of a new, migrated database of that
# name, the same again for the same folder and name. The name is in the URL, so a URL with
# another name names a database no one made.
BACKENDS: dict[str, Callable[[Path, str], str]] = {"sqlite": fresh_sqlite}
if pg_support.SERVER != "off":
    BACKENDS["postgresql"] = pg_support.migrated_url
NOW = 1_790_000_000_000
LEASE = 60_000
LIMITED = LimitRule(1, 3_600_000, ("limited",), ("b",), "1 email per 3600 s of limited")
CATALOG = Catalog(
    {"a": ChannelInfo("a", "log", None, None),  # sends to no address of the person's
     "b": ChannelInfo("b", "smtp", EMAIL, "email")},
    {"limited": KindRules("limited", True, {"email": True}, True, (LIMITED,))})
RULES = policy.rules(CATALOG)


@asynccontextmanager
async def opened(url: str, clock: Clock) -> AsyncIterator[Store]:
    store = await open_store(url, clock)
    try:
        yield store
    finally:
        await store.close()


def inp(user: str = "u1", dedup: str | None = "d1", digest: str = "h1", tenant: str = "acme",
        kind: str = "k") -> AcceptInput:
    return AcceptInput(tenant, user, kind, {"n": 1}, dedup, None, None, digest, "key")


def plan(*channels: str, gap: int = 60_000, seen: list[Recipient | None] | None = None,
         lane: Lane = Lane.BULK) -> PlanFn:
    """A ladder of `channels`, `gap` ms apart from the accept's own time."""
    def make(r: Recipient | None, now: int) -> tuple[list[PlannedStep], Lane]:
        if seen is not None:
            seen.append(r)
        return [PlannedStep(i, ch, now + i * gap) for i, ch in enumerate(channels)], lane
    return make


async def accept(store: Store, nid: str, *channels: str, user: str = "u1",
                 dedup: str | None = None, gap: int = 60_000, kind: str = "k",
                 inbox: InboxEntry | None = None) -> str:
    r = await store.accept(inp(user, dedup or nid, kind=kind), nid, plan(*channels, gap=gap),
                           3600, inbox)
    assert r.created, nid
    return nid


async def claim(store: Store, channel: str = "a", n: int = 10,
                rules: Rules = RULES) -> list[Claim]:
    return (await store.claim_due([Want(channel, Lane.BULK, n)], LEASE, rules)).claims


async def carry(store: Store, clock: FakeClock, *nids: str) -> int:
    """`nids` accepted now and held by the claim for the "daily" digest of the hour after; at
    its end (the clock moved there) the digest n_d carries them. That window's end."""
    window = clock.now_ms() + 3_600_000
    hold = Decision(Verdict.HOLD, "held", until=window, digest="daily")
    for nid in nids:
        await accept(store, nid, "a")
    assert await claim(store, rules=dataclasses.replace(RULES, decide=lambda c, n: hold)) == []
    [due] = await store.due_digests(window, 10)
    members = await store.digest_members(due)
    clock.ms = window
    made = await store.make_digest(due, inp(dedup="digest:daily", kind="daily"), "n_d",
                                   plan("a"), 3600, None,
                                   [StepKey(m.notification_id, m.step_no) for m in members], 0)
    assert made.created
    return window
