"""The SQLite store: the only module with SQL. One writer thread commits many operations together.

Writes are functions run on the writer thread's connection; the writer takes every operation
queued while the last commit ran, wraps each in a SAVEPOINT inside one BEGIN IMMEDIATE, and
commits once (group commit). A failing operation rolls back to its savepoint and fails alone;
every caller is answered only after the commit that holds its rows. Reads use their own
connection (aiosqlite), so a slow reader never waits behind the writer in WAL mode.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import secrets
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import orjson

from notifyd.core.catalog import Catalog, KindRules
from notifyd.core.contacts import BY_FIELD, Address, normal_address
from notifyd.core.models import (
    ENDED,
    REPLAYED,
    SCOPES,
    SUPPRESSING,
    AcceptInput,
    AcceptResult,
    ApiKey,
    Budget,
    Claim,
    ClaimContext,
    Completion,
    DecideFn,
    Decision,
    Device,
    DisabledContact,
    Evidence,
    Lane,
    Notice,
    Outcome,
    PlanFn,
    Receipt,
    ReceiptContext,
    ReceiptRules,
    Recipient,
    ResolveResult,
    StepState,
    Verdict,
    current_state,
    is_digits,
    iso,
    message_key,
)
from notifyd.core.records import (
    Attempt,
    DeadLetter,
    DigestDue,
    DigestMember,
    Event,
    InboxChange,
    InboxItem,
    KeyRecord,
    Notification,
    Proof,
    Step,
    Suppression,
)
from notifyd.store.base import (
    StorageError,
    StoreClosed,
    StoreMissing,
    StoreUnavailable,
)
from notifyd.store.migrate import migrate, migrations, schema_sql
from notifyd.store.sql import (
    ARCHIVE_ITEM,
    BUMP_BADGE,
    CANCEL_PENDING,
    CLAIM_STEP,
    CLOSE_OPEN_ATTEMPTS,
    COMPLETE_STEP,
    COUNT_ORPHANS,
    COUNT_SENDS,
    COUNT_UNREAD,
    DELAY_STEP,
    DELETE_DEVICE,
    DRIFTED_BADGES,
    END_ATTEMPT,
    END_STEP,
    FREEZE_STEP,
    HOLD_ITEM,
    INSERT_ATTEMPT,
    INSERT_EVENT,
    INSERT_INBOX,
    INSERT_KEY,
    INSERT_NOTIFICATION,
    INSERT_RECEIPT,
    INSERT_SIGNING_KEY,
    INSERT_STEP,
    KILL_DEVICE,
    KILL_TENANT_DEVICE,
    MARK_DIGESTED_ITEM,
    MARK_UNKNOWN,
    MATCH_RECEIPT,
    NEXT_DIGEST,
    POSTPONE_STEP,
    PULL_NEXT,
    PUT_PREFERENCES,
    READ_ALL,
    READ_ITEM,
    REPLAY_STEPS,
    RESOLVE,
    REVIVE_DEVICE,
    REVOKE_KEY,
    ROLL_DIGEST,
    SELECT_ATTEMPTS,
    SELECT_BADGE,
    SELECT_DEAD,
    SELECT_DEAD_COUNT,
    SELECT_DEDUP,
    SELECT_DEPTH,
    SELECT_DEVICES,
    SELECT_DIGEST_MEMBERS,
    SELECT_DUE,
    SELECT_DUE_DIGESTS,
    SELECT_EVENTS,
    SELECT_INBOX_ITEM,
    SELECT_INBOX_PAGE,
    SELECT_INBOX_SINCE,
    SELECT_KEY,
    SELECT_KEYS,
    SELECT_LAPSED,
    SELECT_LATER_PENDING,
    SELECT_LEASED,
    SELECT_LOCALE,
    SELECT_NEXT_DUE,
    SELECT_NOTIFICATION,
    SELECT_ORPHANS,
    SELECT_RECEIPT_STEP,
    SELECT_RECEIPTS,
    SELECT_RECIPIENT,
    SELECT_RESOLUTION,
    SELECT_SIGNING_KEY,
    SELECT_STEP_STATES,
    SELECT_STEPS,
    SELECT_SUPPRESSED,
    SELECT_SUPPRESSIONS,
    SELECT_UNCONFIGURED,
    SET_BADGE,
    SET_EVIDENCE,
    STEP_BY_REF,
    SUPPRESS,
    SUPPRESS_SENT,
    UNSUPPRESS,
    UPSERT_DEVICE,
    UPSERT_RECIPIENT,
    WRITE_PROBE,
    next_due_sql,
)
from notifyd.store.writer import Writer, storage_fault

T = TypeVar("T")
log = logging.getLogger("notifyd.store")
RESTORE = ("; to restore: stop notifyd, move the damaged file and its -wal and -shm files "
           "away, copy the backup to its path, start notifyd")


class SqliteStore:
    """One WAL-mode SQLite file behind the store interface."""

    def __init__(self, path: str | Path, synchronous: str = "FULL",
                 busy_timeout_ms: int = 5000, max_queue: int = 0) -> None:
        self.path = str(path)
        self.url = f"sqlite:///{Path(path).resolve()}"
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self._writer = Writer(self.path, self._connect, max_queue)
        self._reader: aiosqlite.Connection | None = None
        # Snapshot reads (a notification with its steps, attempts, events and receipts in one
        # transaction) on one thread and one connection kept open: a fresh connection per read
        # cost ~0.75 ms of CPU (connect, pragma, begin, close).
        self._snapshots = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notifyd-snapshot")
        self._snapshot: sqlite3.Connection | None = None
        self._check = False

    @property
    def commits(self) -> int:
        """Batches committed, for benchmarks and tests of group commit."""
        return self._writer.commits

    @property
    def fault(self) -> str | None:
        """What is wrong with the storage right now, if anything (for /readyz)."""
        return self._writer.fault

    # --- lifecycle ---------------------------------------------------------------------------

    async def open(self, create: bool = True, check: bool = False) -> None:
        """Open (and migrate) the file; with create=False a missing file is an error, so that a
        command that only reads never leaves a fresh database behind. A new file is made
        readable by its owner alone, whatever the umask: it holds contacts and params."""
        where = Path(self.path).resolve()
        if not where.parent.is_dir():
            raise StoreUnavailable(f"the database folder {where.parent} does not exist; create "
                                   "it, or point store.path (or --db) elsewhere")
        if not where.exists():
            if not create:
                raise StoreMissing(f"no database at {where}; check --config / --db (notifyd "
                                   "serve or notifyd keys create makes one)")
            os.close(os.open(where, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        elif where.stat().st_mode & 0o077:
            log.warning("%s can be read by other users (mode %o); it holds contacts and "
                        "params: chmod 600 it and its -wal and -shm files", where,
                        where.stat().st_mode & 0o777)
        self._check = check
        try:
            await self._writer.open()
        except sqlite3.DatabaseError as e:
            raise StoreUnavailable(f"{where} is not a notifyd database or is damaged ({e}); "
                                   f"restore it from a copy (notifyd backup makes one){RESTORE}"
                                   ) from None
        self._reader = await aiosqlite.connect(self.path)
        self._reader.row_factory = aiosqlite.Row
        await self._reader.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            return self._setup(conn)
        except BaseException:
            conn.close()
            raise

    def _setup(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        conn.row_factory = sqlite3.Row
        if self._check:  # damage found now, not by the scanner after "listening"
            problems = [" ".join(r[0].split()) for r in conn.execute("PRAGMA quick_check(3)")]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("damaged: " + "; ".join(problems))
        conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        migrate(conn)
        return conn

    async def close(self) -> None:
        await self._writer.close()
        if self._reader is not None:
            await self._reader.close()
            self._reader = None
        await asyncio.get_running_loop().run_in_executor(self._snapshots, self._close_snapshot)
        self._snapshots.shutdown(wait=True)

    def _close_snapshot(self) -> None:
        if self._snapshot is not None:
            self._snapshot.close()
            self._snapshot = None

    async def write(self, op: Callable[[sqlite3.Connection], T], shed: bool = False) -> T:
        """Run `op` on the writer inside a transaction; return once its commit is durable."""
        return await self._writer.write(op, shed)

    # --- reads -------------------------------------------------------------------------------

    async def _fetchall(self, sql: str, args: tuple[Any, ...] | dict[str, Any]) -> list[Any]:
        """One statement run to its end in one call on the reader's thread. A cursor held open
        across an await would keep a read transaction open on the shared connection, and a
        read issued meanwhile (after a write that had committed) would see the older snapshot:
        PUT a user, then read it back, and find nothing. One call is also one thread hop."""
        assert self._reader is not None
        try:
            return list(await self._reader.execute_fetchall(sql, args))
        except sqlite3.Error as e:
            raise _read_fault(e) from None

    async def _scalar(self, sql: str, args: tuple[Any, ...]) -> int | None:
        rows = await self._fetchall(sql, args)
        return rows[0][0] if rows else None

    async def _fetchone(self, sql: str, args: tuple[Any, ...]) -> Any:
        rows = await self._fetchall(sql, args)
        return rows[0] if rows else None

    # --- API keys ----------------------------------------------------------------------------

    async def create_key(self, key_hash: str, name: str, tenant: str, kinds: tuple[str, ...],
                         now: int, scopes: frozenset[str] = SCOPES) -> None:
        await self.write(lambda c: c.execute(
            INSERT_KEY, (key_hash, name, tenant, ",".join(kinds), now, ",".join(sorted(scopes)))))

    async def find_key(self, key_hash: str) -> ApiKey | None:
        row = await self._fetchone(SELECT_KEY, (key_hash,))
        if row is None:
            return None
        kinds = tuple(k for k in row["kinds"].split(",") if k)
        return ApiKey(row["name"], row["tenant"], kinds, row["key_hash"],
                      frozenset(s for s in row["scopes"].split(",") if s))

    async def list_keys(self) -> list[KeyRecord]:
        return [KeyRecord(r["name"], r["tenant"], tuple(k for k in r["kinds"].split(",") if k),
                          r["created_at"], r["revoked_at"],
                          tuple(s for s in r["scopes"].split(",") if s))
                for r in await self._fetchall(SELECT_KEYS, ())]

    async def revoke_key(self, name: str, now: int) -> bool:
        return await self.write(lambda c: c.execute(REVOKE_KEY, (now, name)).rowcount > 0)

    # --- recipients --------------------------------------------------------------------------

    async def put_recipient(self, r: Recipient, now: int) -> None:
        """Set the profile. A disabled address stays disabled, and counts again only if the
        user's address goes back to it; a new address is live."""
        contacts = json.dumps(r.contacts, sort_keys=True)
        await self.write(lambda c: c.execute(UPSERT_RECIPIENT, (
            r.tenant, r.user_id, r.timezone, r.locale, r.quiet_start, r.quiet_end, contacts, now)))

    async def get_recipient(self, tenant: str, user_id: str) -> Recipient | None:
        """The profile and every disabled contact; a user who never had a profile but has a
        disabled contact is returned too, with no contacts."""
        row = await self._fetchone(SELECT_RECIPIENT, (tenant, user_id))
        addresses = json.loads(row["contacts"]) if row else {}
        disabled = await self._fetchall(SELECT_SUPPRESSED, (
            tenant, json.dumps(list(addresses.values())))) if addresses else []
        devices = await self._fetchall(SELECT_DEVICES, (tenant, user_id))
        return _recipient(tenant, user_id, row, disabled, devices)

    async def put_device(self, tenant: str, user_id: str, device: Device, now: int) -> None:
        """Register a device (again: the same endpoint is the same device, live once more)."""
        await self.write(lambda c: c.execute(UPSERT_DEVICE, (
            tenant, user_id, device.device_id, device.kind, device.endpoint, device.p256dh,
            device.auth, now, now)))

    async def delete_device(self, tenant: str, user_id: str, device_id: str) -> bool:
        return await self.write(lambda c: c.execute(
            DELETE_DEVICE, (tenant, user_id, device_id)).rowcount > 0)

    # --- accept ------------------------------------------------------------------------------

    async def accept(self, inp: AcceptInput, notification_id: str, plan: PlanFn,
                     ttl_sec: int, now: int, inbox: tuple[str, str | None] | None = None
                     ) -> AcceptResult:
        """Claim the dedup key and write the notification with its whole ladder, and its inbox
        item (title, body) when it has one, atomically."""
        params = orjson.dumps(inp.params).decode()
        return await self.write(  # past max_queue waiting, refused: 503, retry
            lambda c: _accept(c, inp, notification_id, params, plan, ttl_sec, now, inbox),
            shed=True)

    async def make_digest(self, due: DigestDue, inp: AcceptInput, notification_id: str,
                          plan: PlanFn, ttl_sec: int, now: int,
                          inbox: tuple[str, str | None] | None, members: list[tuple[str, int]],
                          rollover: int) -> AcceptResult:
        """Write the digest notification and mark the held items it carries, in one
        transaction: a rebuild finds them carried and can never notify them again. Items held
        for the same window after `members` were read move to the next window (`rollover`)."""
        params = orjson.dumps(inp.params).decode()

        def op(c: sqlite3.Connection) -> AcceptResult:
            result = _accept(c, inp, notification_id, params, plan, ttl_sec, now, inbox)
            if result.created:
                c.executemany(MARK_DIGESTED_ITEM, [(notification_id, nid, no)
                                                   for nid, no in members])
            c.execute(ROLL_DIGEST, (rollover, due.tenant, due.user_id, due.digest_kind,
                                    due.window_end))
            return result

        return await self.write(op)

    async def digest_members(self, due: DigestDue) -> list[DigestMember]:
        rows = await self._fetchall(SELECT_DIGEST_MEMBERS, (
            due.tenant, due.user_id, due.digest_kind, due.window_end))
        return [DigestMember(r["notification_id"], r["step_no"], r["kind"],
                             orjson.loads(r["params"]), r["created_at"]) for r in rows]

    async def due_digests(self, now: int, limit: int) -> list[DigestDue]:
        return [DigestDue(*r) for r in await self._fetchall(SELECT_DUE_DIGESTS, (now, limit))]

    async def next_digest_at(self) -> int | None:
        return await self._scalar(NEXT_DIGEST, ())

    # --- preferences and the inbox ------------------------------------------------------------

    async def locale_of(self, tenant: str, user_id: str) -> str | None:
        row = await self._fetchone(SELECT_LOCALE, (tenant, user_id))
        return row[0] if row else None

    async def find_signing_key(self, name: str) -> bytes | None:
        """The named key if it was made; never makes one (a forged token names any tenant)."""
        row = await self._fetchone(SELECT_SIGNING_KEY, (name,))
        return bytes(row[0]) if row else None

    async def put_preferences(self, tenant: str, user_id: str, preferences: dict[str, Any],
                              now: int) -> int:
        """Set the person's preferences; the new version, which the next claim records."""
        text = json.dumps(preferences, sort_keys=True)
        return int(await self.write(lambda c: c.execute(PUT_PREFERENCES, (
            tenant, user_id, now, text)).fetchone()[0]))

    async def inbox_page(self, tenant: str, user_id: str, before: tuple[int, str] | None,
                         limit: int, archived: bool = False) -> list[InboxItem]:
        """Newest first, strictly before the (created_at, id) cursor."""
        at, nid = before if before is not None else (2**62, "")
        rows = await self._fetchall(SELECT_INBOX_PAGE, (tenant, user_id, at, nid, archived,
                                                        limit))
        return [InboxItem(*r) for r in rows]

    async def inbox_since(self, tenant: str, user_id: str, seq: int,
                          limit: int) -> list[InboxItem]:
        rows = await self._fetchall(SELECT_INBOX_SINCE, (tenant, user_id, seq, limit))
        return [InboxItem(*r) for r in rows]

    async def badge(self, tenant: str, user_id: str) -> int:
        return await self._scalar(SELECT_BADGE, (tenant, user_id)) or 0

    async def read_item(self, tenant: str, user_id: str, item_id: str, now: int,
                        stop_on_read: frozenset[str]) -> InboxChange | None:
        """Mark one item read; a kind with stop = "read" is resolved by it, in the same
        transaction. None: no such item of this user's."""

        def op(c: sqlite3.Connection) -> InboxChange | None:
            item = c.execute(SELECT_INBOX_ITEM, (tenant, user_id, item_id)).fetchone()
            if item is None:
                return None
            row = c.execute(READ_ITEM, (now, tenant, user_id, item_id)).fetchone()
            unread = bool(row and row[0])  # it counted in the badge: unread and not archived
            badge = _bump_badge(c, tenant, user_id, -1) if unread else _badge(c, tenant, user_id)
            done = _resolve_read(c, [(item_id, item["kind"])], stop_on_read, now) if row else ()
            return InboxChange(row is not None, badge, done)

        return await self.write(op)

    async def read_all(self, tenant: str, user_id: str, now: int,
                       stop_on_read: frozenset[str]) -> InboxChange:
        def op(c: sqlite3.Connection) -> InboxChange:
            rows = c.execute(READ_ALL, (now, tenant, user_id)).fetchall()
            c.execute(SET_BADGE, (tenant, user_id, 0))
            done = _resolve_read(c, [(r[0], r[1]) for r in rows], stop_on_read, now)
            return InboxChange(bool(rows), 0, done)

        return await self.write(op)

    async def archive_item(self, tenant: str, user_id: str, item_id: str,
                           now: int) -> InboxChange | None:
        def op(c: sqlite3.Connection) -> InboxChange | None:
            if c.execute(SELECT_INBOX_ITEM, (tenant, user_id, item_id)).fetchone() is None:
                return None
            row = c.execute(ARCHIVE_ITEM, (now, tenant, user_id, item_id)).fetchone()
            unread = bool(row and row[0])
            badge = _bump_badge(c, tenant, user_id, -1) if unread else _badge(c, tenant, user_id)
            return InboxChange(row is not None, badge)

        return await self.write(op)

    async def rebuild_badges(self) -> int:
        """Every badge recomputed from the rows; how many had drifted."""

        def op(c: sqlite3.Connection) -> int:
            wrong = [(t, u, actual) for t, u, kept, actual in c.execute(DRIFTED_BADGES)
                     if kept != actual]
            c.executemany(SET_BADGE, wrong)
            return len(wrong)

        return await self.write(op)

    async def signing_key(self, name: str, now: int) -> bytes:
        """The named signing key, made (32 random bytes) the first time it is asked for."""

        def op(c: sqlite3.Connection) -> bytes:
            c.execute(INSERT_SIGNING_KEY, (name, secrets.token_bytes(32), now))
            return bytes(c.execute(SELECT_SIGNING_KEY, (name,)).fetchone()[0])

        return await self.write(op)

    # --- resolution --------------------------------------------------------------------------

    async def resolve(self, notification_id: str, resolution: str, by: str, now: int,
                      tenant: str | None = None, kinds: tuple[str, ...] = ()
                      ) -> ResolveResult | None:
        """Resolve once; the first resolution wins and later calls report it unchanged.
        With `tenant` (and `kinds`, empty: any), a notification outside them is not found
        and nothing is written: an API key's scope checked in the same transaction, so
        resolving by id is one trip to the writer (issue 14's soak)."""

        def op(c: sqlite3.Connection) -> ResolveResult | None:
            row = c.execute(SELECT_RESOLUTION, (notification_id,)).fetchone()
            if row is None or (tenant is not None and row["tenant"] != tenant) or (
                    kinds and row["kind"] not in kinds):
                return None
            if row["resolved_at"] is not None:  # read inside the write: an earlier one won
                return ResolveResult(notification_id, row["resolution"], row["resolved_at"],
                                     False, 0, 0, row["kind"])
            c.execute(RESOLVE, (now, resolution, by, notification_id))
            depth = c.execute(SELECT_DEPTH, (notification_id,)).fetchone()[0]
            cancelled = c.execute(CANCEL_PENDING, (
                f"resolved: {resolution}", now, notification_id)).rowcount
            return ResolveResult(notification_id, resolution, now, True, cancelled, depth,
                                 row["kind"])

        return await self.write(op)

    async def find_by_dedup(self, tenant: str, user_id: str, dedup_key: str) -> str | None:
        row = await self._fetchone(SELECT_DEDUP, (tenant, user_id, dedup_key))
        return row["id"] if row else None

    async def get_notification(self, notification_id: str) -> Notification | None:
        """The notification with its steps and attempts, read in one snapshot so that the three
        agree. It runs on a connection of its own: a transaction on the shared reader would
        hold every other read back in time."""
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self._snapshots, self._read_notification, notification_id)
        except sqlite3.Error as e:
            raise _read_fault(e) from None

    def _read_notification(self, notification_id: str) -> Notification | None:
        if self._snapshot is None:
            self._snapshot = sqlite3.connect(self.path, isolation_level=None)
            self._snapshot.row_factory = sqlite3.Row
            self._snapshot.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
        conn = self._snapshot
        conn.execute("BEGIN")
        try:
            n = conn.execute(SELECT_NOTIFICATION, (notification_id,)).fetchone()
            if n is None:
                return None
            steps = conn.execute(SELECT_STEPS, (notification_id,)).fetchall()
            attempts = [_attempt(a) for a in conn.execute(SELECT_ATTEMPTS, (notification_id,))]
            events = tuple(Event(*e) for e in conn.execute(SELECT_EVENTS, (notification_id,)))
            proofs = tuple(Proof(*p) for p in conn.execute(SELECT_RECEIPTS, (notification_id,)))
        finally:
            conn.execute("COMMIT")
        return dataclasses.replace(_notification_record(n, steps, attempts, events),
                                   proofs=proofs)

    # --- the delivery engine ----------------------------------------------------------------

    async def claim_due(self, now: int, wants: list[tuple[str, Lane, int]], lease_ms: int,
                        rules: Catalog, decide: DecideFn,
                        budget: Budget | None = None) -> list[Claim]:
        """Claim up to n due steps per (channel, lane), within the shared budget. Each due step
        is judged by `decide` on what this same transaction reads (promise 3: a resolution
        committed before the claim always wins); what it decides is applied here and now."""
        budget = budget or Budget()

        def op(c: sqlite3.Connection) -> list[Claim]:
            _lapse_leases(c, now)
            claims: list[Claim] = []
            sending: dict[str, int] = {}  # claimed in this transaction: a sibling in flight
            for channel, lane, n in wants:
                n = budget.allow(channel, n)
                taken = 0
                while taken < n:
                    rows = c.execute(SELECT_DUE, (channel, lane, now, n - taken + 16)).fetchall()
                    for row in rows:
                        if taken >= n:
                            break
                        claim = _judge(c, row, rules, sending, decide, now, lease_ms)
                        if claim is not None:
                            claims.append(claim)
                            sending[claim.notification_id] = claim.step_no
                            taken += 1
                    if len(rows) < n - taken + 16:
                        break
                budget.spend(channel, taken)
            return claims

        return await self.write(op)

    async def freeze(self, frozen: list[tuple[Claim, str, str, str | None]],
                     now: int) -> list[bool]:
        """Fix each step's rendered destination, payload and template while its claim is still
        ours."""

        def op(c: sqlite3.Connection) -> list[bool]:
            return [c.execute(FREEZE_STEP, (
                destination, payload, template, now, claim.notification_id, claim.step_no,
                claim.claim_token)).rowcount > 0
                for claim, destination, payload, template in frozen]

        return await self.write(op)

    async def complete(self, claim: Claim, done: Completion, now: int,
                       rules: ReceiptRules | None = None) -> bool:
        """Record the attempt, and apply the decision if the claim token is still ours; then
        apply receipts that arrived before this answer named its message."""

        def op(c: sqlite3.Connection) -> bool:
            nid, no = claim.notification_id, claim.step_no
            c.execute(END_ATTEMPT, (now, done.outcome, done.reason, done.provider_ref, nid, no,
                                    claim.attempt_no))
            applied = c.execute(COMPLETE_STEP, (
                done.state, done.reason, done.provider_ref, done.retry_at, now, nid, no,
                claim.claim_token)).rowcount > 0
            if applied and done.disable_contact and isinstance(claim.contact, Address):
                c.execute(SUPPRESS_SENT, (claim.contact.suppression, claim.destination or "",
                                          done.reason or "rejected", claim.key, now, nid))
            if applied and done.pull_next:
                _pull_next(c, nid, f"step {no} {done.state}", no, now, now)
            if applied and done.state is StepState.SENT:
                _start_window(c, nid, no, now)
            for device_id, why in done.dead_devices:  # whatever became of the step
                c.execute(KILL_DEVICE, (why, now, device_id, nid))
            if applied and done.provider_ref and rules is not None:
                for row in c.execute(SELECT_ORPHANS, (done.provider_ref,)).fetchall():
                    _apply_receipt(c, _receipt(row), nid, no, now, rules)
            return applied

        return await self.write(op)

    async def lapse_leases(self, now: int) -> int:
        """Steps whose lease has run out become unknown, retried at once under the same key.
        A step still within its lease is left alone: another process may be sending it."""
        return await self.write(lambda c: _lapse_leases(c, now))

    async def leased(self) -> tuple[int, int | None]:
        """How many steps are in flight under a lease, and when the last lease ends."""
        row = await self._fetchone(SELECT_LEASED, ())
        return int(row[0]), row[1]

    async def next_due(self, pairs: list[tuple[str, Lane]]) -> int | None:
        """The earliest send_after among open steps that may go, or lease end among in-flight
        ones: one read."""
        return await self._scalar(next_due_sql(len(pairs)),
                                  tuple(x for pair in pairs for x in pair))

    async def replay(self, notification_id: str, step_no: int | None, now: int) -> int:
        """Put dead or unknown steps back to pending under their original key and payload."""

        def op(c: sqlite3.Connection) -> int:
            replayed = c.execute(REPLAY_STEPS, (now, REPLAYED, now, notification_id, step_no,
                                                step_no)).fetchall()
            c.executemany(INSERT_EVENT, [(notification_id, no, now, REPLAYED)
                                         for (no,) in replayed])
            return len(replayed)

        return await self.write(op)

    async def end_unconfigured(self, channels: list[str], decide: DecideFn, now: int) -> int:
        """Open steps on channels the config no longer has are judged by `decide` as such
        (it ends them, naming why) in one transaction."""

        def op(c: sqlite3.Connection) -> int:
            rows = c.execute(SELECT_UNCONFIGURED, (json.dumps(channels),)).fetchall()
            for row in rows:
                ctx = ClaimContext(row["notification_id"], row["step_no"], row["channel"],
                                   Lane(row["lane"]), row["send_after"], row["resolution"],
                                   row["expires_at"], None, None, None, configured=False)
                _apply(c, row, decide(ctx, now), now, None)
            return len(rows)

        return await self.write(op)

    async def oldest_due(self, pairs: list[tuple[str, Lane]]) -> dict[tuple[str, Lane], int]:
        """The earliest send_after among open steps, per (channel, lane) that has any."""
        found = {pair: await self._scalar(SELECT_NEXT_DUE, pair) for pair in pairs}
        return {pair: at for pair, at in found.items() if at is not None}

    async def dead_count(self) -> int:
        return await self._scalar(SELECT_DEAD_COUNT, ()) or 0

    async def ping(self) -> None:
        """A real write (one row rewritten): the store can take writes now."""
        await self.write(lambda c: c.execute(WRITE_PROBE, (time.time_ns() // 1_000_000,)))

    async def backup(self, dest: str) -> None:
        """A consistent copy of the database at `dest` (VACUUM INTO: compact, and safe beside
        the running daemon), readable by its owner alone."""
        os.close(os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))

        def copy() -> None:
            conn = sqlite3.connect(self.path, isolation_level=None)
            try:
                conn.execute(f"PRAGMA busy_timeout = {self.busy_timeout_ms}")
                conn.execute("VACUUM INTO ?", (dest,))
            finally:
                conn.close()

        try:
            await asyncio.to_thread(copy)
        except BaseException:
            os.unlink(dest)
            raise

    # --- provider evidence and the suppression list ------------------------------------------

    async def record_receipts(self, receipts: list[Receipt], now: int,
                              rules: ReceiptRules) -> list[str]:
        """Store each receipt and apply it, in one transaction, before the provider is
        answered: 'applied', 'duplicate' (seen before), or 'orphan' (no step matches yet: it is
        kept, and applied when its send's answer names the message)."""
        return await self.write(lambda c: [_record(c, r, now, rules) for r in receipts])

    async def suppress(self, tenant: str, channel_type: str, address: str, reason: str,
                       source: str, now: int) -> bool:
        """Put an address on the tenant's list ('push': kill the device); False if it was."""
        if channel_type == "push":
            return await self.write(lambda c: c.execute(KILL_TENANT_DEVICE, (
                reason, now, tenant, address)).rowcount > 0)
        return await self.write(lambda c: c.execute(SUPPRESS, (
            tenant, channel_type, normal_address(channel_type, address), reason, source, None,
            now)).rowcount > 0)

    async def unsuppress(self, tenant: str, channel_type: str, address: str, now: int) -> bool:
        """Take an address off the list ('push': the device lives again); False if absent."""
        if channel_type == "push":
            return await self.write(lambda c: c.execute(REVIVE_DEVICE, (
                now, tenant, address)).rowcount > 0)
        return await self.write(lambda c: c.execute(
            UNSUPPRESS, (tenant, channel_type, normal_address(channel_type, address))
        ).rowcount > 0)

    async def suppressions(self, tenant: str, address: str | None = None,
                           limit: int = 1000) -> list[Suppression]:
        rows = await self._fetchall(SELECT_SUPPRESSIONS, {
            "tenant": tenant, "address": address, "limit": limit})
        return [Suppression(*r) for r in rows]

    async def orphan_count(self) -> int:
        return await self._scalar(COUNT_ORPHANS, ()) or 0

    async def dead_letters(self, limit: int) -> list[DeadLetter]:
        return [DeadLetter(*r) for r in await self._fetchall(SELECT_DEAD, (limit,))]


def _accept(c: sqlite3.Connection, inp: AcceptInput, notification_id: str, params: str,
            plan: PlanFn, ttl_sec: int, now: int,
            inbox: tuple[str, str | None] | None) -> AcceptResult:
    expires_at = now + ttl_sec * 1000
    inserted = c.execute(INSERT_NOTIFICATION, (
        notification_id, inp.tenant, inp.user_id, inp.kind, inp.dedup_key,
        inp.request_hash, params, inp.key_name, now, expires_at)).rowcount
    if not inserted:
        hit = c.execute(SELECT_DEDUP, (inp.tenant, inp.user_id, inp.dedup_key)).fetchone()
        same = hit["request_hash"] == inp.request_hash
        resolved = c.execute(SELECT_RESOLUTION, (hit["id"],)).fetchone()["resolved_at"]
        state = current_state(resolved is not None,
                              c.execute(SELECT_STEP_STATES, (hit["id"],)).fetchall())
        return AcceptResult(hit["id"], created=False, state=state, conflict=not same,
                            existing_kind=hit["kind"])
    recipient = _load_recipient(c, inp.tenant, inp.user_id)
    steps, lane = plan(recipient)
    c.executemany(INSERT_STEP, [
        (notification_id, s.step_no, s.channel, lane, s.send_after, s.state,
         s.reason, s.note, now, s.send_after, s.cause) for s in steps])
    due = [s.send_after for s in steps if s.state == StepState.PENDING]
    state = current_state(False, ((s.channel, s.state) for s in steps))
    seq = badge = None
    if inbox is not None:  # the person's history, whatever the preferences say of the sends
        seq = c.execute(INSERT_INBOX, (inp.tenant, inp.user_id, notification_id, inp.kind,
                                       inbox[0], inbox[1], now)).fetchone()[0]
        badge = _bump_badge(c, inp.tenant, inp.user_id, 1)
    return AcceptResult(notification_id, True, state, first_due=min(due, default=None),
                        inbox_seq=seq, badge=badge)


def _bump_badge(c: sqlite3.Connection, tenant: str, user_id: str, by: int) -> int:
    """The badge moved by `by`; one that would go below zero has drifted: rebuilt from rows."""
    kept = _badge(c, tenant, user_id)
    if kept + by < 0:
        actual = c.execute(COUNT_UNREAD, (tenant, user_id)).fetchone()[0]
        c.execute(SET_BADGE, (tenant, user_id, actual))
        return int(actual)
    return int(c.execute(BUMP_BADGE, (tenant, user_id, by, by)).fetchone()[0])


def _badge(c: sqlite3.Connection, tenant: str, user_id: str) -> int:
    row = c.execute(SELECT_BADGE, (tenant, user_id)).fetchone()
    return int(row[0]) if row else 0


def _resolve_read(c: sqlite3.Connection, items: list[tuple[str, str]],
                  stop_on_read: frozenset[str], now: int) -> tuple[str, ...]:
    """Resolve, as "read", the notifications of kinds that stop when read (seed 000)."""
    done = []
    for nid, kind in items:
        if kind in stop_on_read and c.execute(RESOLVE, (now, "read", "inbox", nid)).rowcount:
            c.execute(CANCEL_PENDING, ("resolved: read", now, nid))
            done.append(nid)
    return tuple(done)


def _record(c: sqlite3.Connection, r: Receipt, now: int, rules: ReceiptRules) -> str:
    """Store one receipt; apply it to its step if one matches, else keep it as an orphan."""
    inserted = c.execute(INSERT_RECEIPT, (
        r.provider, r.event_id, r.event, r.occurred_at, now, r.provider_ref, r.key, r.message_id,
        r.address, r.channel_type, r.detail, None, None)).rowcount
    if not inserted:
        return "duplicate"
    step = _match(c, r)
    if step is None:
        if r.key is None and r.provider_ref is None and r.message_id is None and r.address \
                and r.channel_type and r.event in SUPPRESSING:  # an account-wide fact (a STOP)
            c.execute(SUPPRESS, ("*", r.channel_type, normal_address(r.channel_type, r.address),
                                 str(r.event), r.provider,
                                 f"{r.provider}:{r.event_id}", now))
        return "orphan"
    _apply_receipt(c, r, step[0], step[1], now, rules)
    return "applied"


def _match(c: sqlite3.Connection, r: Receipt) -> tuple[str, int] | None:
    """The step a receipt is about: by the step key it carries, the provider's message id, or
    the Message-ID notifyd set."""
    for key in (r.key, message_key(r.message_id)):
        nid, _, rest = (key or "").partition(":")
        step = rest.partition(":")[0]
        if nid and is_digits(step) and c.execute(
                SELECT_RECEIPT_STEP, (nid, int(step))).fetchone() is not None:
            return nid, int(step)
    if r.provider_ref:
        row = c.execute(STEP_BY_REF, (r.provider_ref,)).fetchone()
        if row is not None:
            return row[0], row[1]
    return None


def _apply_receipt(c: sqlite3.Connection, r: Receipt, nid: str, no: int, now: int,
                   rules: ReceiptRules) -> None:
    c.execute(MATCH_RECEIPT, (nid, no, r.provider, r.event_id))
    row = c.execute(SELECT_RECEIPT_STEP, (nid, no)).fetchone()
    contact = rules.catalog.contact(row["channel"])
    address = contact if isinstance(contact, Address) else None
    channel_type = address.suppression if address is not None else r.channel_type
    device = (r.key or "").split(":")[2] if (r.key or "").count(":") >= 2 else None
    d = rules.judge(ReceiptContext(
        r.event, rules.catalog.stop(row["kind"]), row["resolved_at"] is not None,
        StepState(row["state"]), row["evidence"], channel_type,
        r.address or (row["destination"] if address is not None else None), device))
    if d.evidence is not None:
        c.execute(SET_EVIDENCE, (d.evidence, nid, no))
    if d.resolve and c.execute(RESOLVE, (now, "delivered", f"receipt:{r.provider}",
                                         nid)).rowcount:
        c.execute(CANCEL_PENDING, ("resolved: delivered", now, nid))
    if d.suppress and channel_type:
        c.execute(SUPPRESS, (row["tenant"], channel_type,
                             normal_address(channel_type, r.address or row["destination"] or ""),
                             d.suppress, r.provider, f"{r.provider}:{r.event_id}", now))
    if d.pull_next:
        _pull_next(c, nid, f"step {no} {r.event}", no, now, now)
    if d.kill_device and device:
        c.execute(KILL_DEVICE, (f"{r.provider}: {r.event}", now, device, nid))


def _receipt(row: sqlite3.Row) -> Receipt:
    return Receipt(row["provider"], row["event_id"], Evidence(row["event"]), row["occurred_at"],
                   row["provider_ref"], row["step_key"], row["message_id"], row["address"],
                   row["channel_type"], row["detail"])


def _read_fault(e: sqlite3.Error) -> Exception:
    """A read that failed because of the storage (no file descriptors left, the disk) as
    StorageError; any other error as it is."""
    fault = storage_fault(e)
    return StorageError(f"{fault} (a read)") if fault else e


def _lapse_leases(c: sqlite3.Connection, now: int) -> int:
    rows = c.execute(SELECT_LAPSED, (now,)).fetchall()
    for nid, no in rows:
        _mark_unknown(c, nid, no, now, "lease expired: the send may have reached the provider")
    return len(rows)


def _mark_unknown(c: sqlite3.Connection, nid: str, no: int, now: int, why: str) -> None:
    c.execute(MARK_UNKNOWN, (why, now, now, nid, no))
    c.execute(CLOSE_OPEN_ATTEMPTS, (now, why, nid, no))


def _judge(c: sqlite3.Connection, row: sqlite3.Row, rules: Catalog, sending: dict[str, int],
           decide: DecideFn, now: int, lease_ms: int) -> Claim | None:
    """Read one due row into the policy's context, apply its decision; a Claim if it sends."""
    nid, no, channel, kind = row["notification_id"], row["step_no"], row["channel"], row["kind"]
    contact = rules.contact(channel)
    recipient = None
    if row["contacts"] is not None or row["has_disabled"] or row["has_devices"]:
        who = (row["tenant"], row["user_id"])
        disabled = c.execute(SELECT_SUPPRESSED, (row["tenant"], json.dumps(list(json.loads(
            row["contacts"]).values())))).fetchall() if row["has_disabled"] else []
        devices = c.execute(SELECT_DEVICES, who).fetchall() if row["has_devices"] else []
        recipient = _recipient(row["tenant"], row["user_id"],
                               row if row["contacts"] is not None else None, disabled, devices)
    in_flight = sending.get(nid)  # SELECT_DUE skips steps with a sibling in flight already
    kind_rules = rules.kinds.get(kind)
    ctx = ClaimContext(nid, no, channel, Lane(row["lane"]), row["send_after"],
                       row["resolution"] if row["resolved_at"] is not None else None,
                       row["expires_at"], in_flight, recipient, contact, rules=kind_rules,
                       medium=rules.medium(channel),
                       over_limit=_over_limit(c, row, kind_rules, now) if kind_rules else None,
                       attempts=row["attempts"] - row["retry_base"])
    decision = decide(ctx, now)
    version = recipient.pref_version if recipient is not None else None
    if decision.verdict is not Verdict.SEND:
        _apply(c, row, decision, now, version)
        return None
    attempt = row["attempts"] + 1
    token = secrets.token_hex(8)
    c.execute(CLAIM_STEP, (attempt, token, now + lease_ms, now, version, nid, no))
    c.execute(INSERT_ATTEMPT, (nid, no, attempt, token, now))
    frozen = row["payload"]
    notice = None if frozen is not None else Notice(
        kind, row["tenant"], row["user_id"], orjson.loads(row["params"]),
        row["created_at"], recipient)
    return Claim(nid, no, channel, ctx.lane, attempt, attempt - row["retry_base"], token,
                 row["expires_at"], contact, row["destination"],
                 None if frozen is None else json.loads(frozen), notice)


def _over_limit(c: sqlite3.Connection, row: sqlite3.Row, rules: KindRules,
                now: int) -> str | None:
    """The first send limit this step's first send would pass (sends of the window counted in
    this transaction, earlier claims of it included); None when none would. Retries never
    count again: their first attempt already did."""
    if row["attempts"] > 0:
        return None
    for lim in rules.limits:
        if not lim.covers(row["kind"], row["channel"]):
            continue
        kinds, channels = json.dumps(lim.kinds), json.dumps(lim.channels)
        sent = c.execute(COUNT_SENDS, (now - lim.window_ms, row["tenant"], row["user_id"],
                                       kinds, kinds, channels, channels)).fetchone()[0]
        if sent >= lim.count:
            return lim.label
    return None


def _apply(c: sqlite3.Connection, row: sqlite3.Row, d: Decision, now: int,
           version: int | None) -> None:
    """Apply a verdict other than send: postpone the step, or end it (and pull the next), or
    hold it for its digest. A postponement is an event when its reason is new (not each second
    a sibling stays out). The preference version read is kept with the decision."""
    nid, no = row["notification_id"], row["step_no"]
    if d.verdict is Verdict.POSTPONE:
        c.execute(POSTPONE_STEP, (d.until, d.reason, now, nid, no))
        if d.reason != row["reason"]:
            c.execute(INSERT_EVENT, (nid, no, now, f"postponed to {iso(d.until)}: {d.reason}"))
        return
    state = ENDED[d.verdict]
    c.execute(END_STEP, (state, d.reason, now, version, nid, no))
    if d.verdict is Verdict.HOLD and d.digest and d.until is not None:
        c.execute(HOLD_ITEM, (nid, no, row["tenant"], row["user_id"], d.digest, d.until, now))
    if d.pull_next_at is not None:  # the ladder moves on rather than sit out this step's window
        _pull_next(c, nid, f"step {no} {state}", no, d.pull_next_at, now)


def _pull_next(c: sqlite3.Connection, nid: str, what: str, no: int, at: int, now: int) -> None:
    """The step after `no` becomes due at `at` if it was due later, because of `what` (step 0
    dead, step 0 bounced); an event says why."""
    why = f"pulled forward: {what}"
    for (pulled,) in c.execute(PULL_NEXT, (at, why, now, nid, at, nid, no)).fetchall():
        c.execute(INSERT_EVENT, (nid, pulled, now, f"{why}; due {iso(at)}"))


def _start_window(c: sqlite3.Connection, nid: str, no: int, now: int) -> None:
    """Step `no` went out at `now`: a window measured from it (cause 'window NO SEC') starts
    now, not when the step was planned, so a send held back by a rate limit, a breaker or
    retries never eats the next channel's wait. Later steps keep their order and spacing."""
    prev_no, prev_at = no, now
    for step_no, send_after, cause in c.execute(SELECT_LATER_PENDING, (nid, no)).fetchall():
        what, _, rest = (cause or "").partition(" ")
        of, _, sec = rest.partition(" ")
        at = prev_at + int(float(sec) * 1000) if what == "window" and of == str(prev_no) \
            else prev_at
        if at <= send_after:
            return
        c.execute(DELAY_STEP, (at, now, nid, step_no))  # the planned cause still says why
        prev_no, prev_at = step_no, at


def _attempt(r: sqlite3.Row) -> Attempt:
    outcome = Outcome(r["outcome"]) if r["outcome"] is not None else None
    return Attempt(r["notification_id"], r["step_no"], r["attempt_no"], r["claim_token"],
                   r["started_at"], r["ended_at"], outcome, r["reason"], r["provider_ref"])


def _notification_record(n: sqlite3.Row, steps: list[sqlite3.Row], attempts: list[Attempt],
                         events: tuple[Event, ...]) -> Notification:
    return Notification(
        n["id"], n["tenant"], n["user_id"], n["kind"], n["dedup_key"], n["request_hash"],
        json.loads(n["params"]), n["key_name"], n["created_at"], n["expires_at"],
        n["resolved_at"], n["resolution"], n["resolved_by"], tuple(
            Step(s["notification_id"], s["step_no"], s["channel"], Lane(s["lane"]),
                 s["send_after"], StepState(s["state"]), s["attempts"], s["reason"], s["note"],
                 s["provider_ref"], s["destination"], s["payload"], s["claim_token"],
                 s["lease_until"], s["updated_at"], s["retry_base"],
                 tuple(a for a in attempts if a.step_no == s["step_no"]), s["planned_at"],
                 s["cause"], s["template"], s["evidence"], s["pref_version"])
            for s in steps), events)


def _load_recipient(c: sqlite3.Connection, tenant: str, user_id: str) -> Recipient | None:
    """The profile and its disabled contacts, inside a write transaction."""
    row = c.execute(SELECT_RECIPIENT, (tenant, user_id)).fetchone()
    if row is None:
        return None
    addresses = list(json.loads(row["contacts"]).values())
    disabled = c.execute(SELECT_SUPPRESSED, (tenant, json.dumps(addresses))).fetchall() \
        if addresses else []
    return _recipient(tenant, user_id, row, disabled)


def _recipient(tenant: str, user_id: str, row: Any, disabled: list[Any],
               devices: list[Any] | None = None) -> Recipient | None:
    """A Recipient from a profile row (or None), its disabled-contact rows and its devices."""
    if row is None and not devices:
        return None
    targets = tuple(Device(*d) for d in devices or ())
    if row is None:
        return Recipient(tenant, user_id, devices=targets)
    contacts = json.loads(row["contacts"])
    listed = {(d["channel_type"], d["address"]): d["reason"] for d in disabled}
    dead = tuple(DisabledContact(kind, address, listed[(BY_FIELD[kind].suppression, address)])
                 for kind, address in contacts.items()
                 if kind in BY_FIELD and (BY_FIELD[kind].suppression, address) in listed)
    keys = row.keys()
    prefs = row["preferences"] if "preferences" in keys else None
    return Recipient(tenant, user_id, row["timezone"], row["locale"], row["quiet_start"],
                     row["quiet_end"], contacts, dead, targets,
                     json.loads(prefs) if prefs else {},
                     row["pref_version"] if "pref_version" in keys else 0)


__all__ = ["SqliteStore", "StoreClosed", "migrate", "migrations", "schema_sql"]
