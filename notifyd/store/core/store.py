"""The `Store` over any backend: each method is one script in one transaction, or one read.

Every time a write records (an accept, a claim, a completion, a resolution, a receipt, a
suppression, an inbox read) is the transaction's own `tx.now`, never a time its caller took
before awaiting its turn, so the rows' times agree with their commit order.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Callable
from typing import Any

import orjson

from notifyd.core.contacts import SUPPRESSION_KEY, hashed_address, normal_address
from notifyd.core.errors import DomainError
from notifyd.core.models import (
    SCOPES,
    AcceptInput,
    AcceptResult,
    ApiKey,
    Budget,
    Claim,
    Claimed,
    Completion,
    Decided,
    DecideFn,
    Device,
    Due,
    DueTimes,
    Freeze,
    FreezeFn,
    Leases,
    Nonce,
    PlanFn,
    PreferencesEdit,
    Receipt,
    Recipient,
    RecipientEdit,
    Recorded,
    ResolveResult,
    Route,
    Rules,
    Want,
    id_time,
)
from notifyd.core.records import (
    Acceptance,
    Aged,
    Cursor,
    DeadLetter,
    DeadMatch,
    DeadStep,
    DigestDue,
    DigestMember,
    Erased,
    Hours,
    InboxChange,
    InboxItem,
    KeyRecord,
    Listed,
    Notification,
    Pruned,
    SigningKey,
    Storage,
    Stuck,
    Suppression,
    TenantRecord,
)
from notifyd.core.steps import StepKey
from notifyd.store.base import Inbox
from notifyd.store.core import (
    accept,
    delivery,
    erasure,
    inbox,
    people,
    receipts,
    retention,
    rows,
)
from notifyd.store.core.fanout import FanoutMethods
from notifyd.store.core.tx import Args, Backend, Row, Tx

FAR = 2**62  # a cursor past every row


def _when(oldest: object) -> int | None:
    """A class's oldest row's time: epoch ms (as digits, where the dialect gives them in one
    text column with the ids), or read from a notification's id."""
    if oldest is None or isinstance(oldest, int):
        return oldest
    text = str(oldest)
    return int(text) if text.isdigit() else id_time(text)


class CoreStore(FanoutMethods):  # events and topics: store/core/fanout.py
    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.q = backend.q
        self.url = backend.url

    # --- operations ---------------------------------------------------------------------------

    async def open(self, create: bool = True, check: bool = False) -> None:
        await self.backend.open(create, check)

    async def close(self) -> None:
        await self.backend.close()

    async def backup(self, dest: str) -> None:
        await self.backend.backup(dest)

    @property
    def fault(self) -> str | None:
        return self.backend.fault

    @property
    def shared(self) -> bool:
        return self.backend.shared

    async def watch(self, due: Callable[[int], None], inbox: Callable[[str, str], None],
                    stop: asyncio.Event) -> None:
        await self.backend.watch(due, inbox, stop)

    async def ping(self) -> None:
        """A real write (one row rewritten): the store can take writes now."""
        await self.backend.write(lambda tx: tx.run(self.q.WRITE_PROBE, (tx.now,)))

    async def dead_letters(self, limit: int) -> list[DeadLetter]:
        return [DeadLetter(r["notification_id"], r["step_no"], r["channel"], r["attempts"],
                           r["reason"], r["updated_at"])
                for r in await self._all(self.q.SELECT_DEAD, (limit,))]

    async def dead_count(self, match: DeadMatch | None = None) -> int:
        if match is None:
            return int(await self._value(self.q.SELECT_DEAD_COUNT) or 0)
        return int(await self._value(self.q.COUNT_DEAD_MATCHING, _matching(match)) or 0)

    async def dead_steps(self, match: DeadMatch, after: DeadStep | None,
                         limit: int) -> list[DeadStep]:
        start = (after.died_at, after.notification_id, after.step_no) if after else (-1, "", -1)
        found = await self._all(self.q.SELECT_DEAD_MATCHING, {
            **_matching(match), "at": start[0], "nid": start[1], "step": start[2],
            "limit": limit})
        return [DeadStep(r["notification_id"], r["step_no"], r["updated_at"], r["expires_at"])
                for r in found]

    async def stuck_steps(self, tenant: str, state: str, limit: int) -> list[Stuck]:
        sql = self.q.SELECT_DEAD_OF if state == "dead" else self.q.SELECT_UNKNOWN_OF
        return [Stuck(r["notification_id"], r["step_no"], r["channel"], r["kind"], r["user_id"],
                      r["state"], r["attempts"], r["reason"], r["updated_at"])
                for r in await self._all(sql, {"tenant": tenant, "limit": limit})]

    async def notifications_of(self, tenant: str, user_id: str, limit: int) -> list[Listed]:
        return [Listed(r["id"], r["kind"], r["dedup_key"], r["created_at"], r["resolution"],
                       r["resolved_at"], r["pruned_at"])
                for r in await self._all(self.q.SELECT_NOTIFICATIONS_OF, {
                    "tenant": tenant, "user_id": user_id, "limit": limit})]

    async def oldest_due(self, routes: list[Route]) -> dict[Route, int]:
        found = {r: await self._value(self.q.SELECT_NEXT_DUE, (r.channel, r.lane))
                 for r in routes}
        return {r: int(at) for r, at in found.items() if at is not None}

    # --- tenants and keys ---------------------------------------------------------------------

    async def create_tenant(self, name: str) -> bool:
        return await self.backend.write(
            lambda tx: tx.run(self.q.INSERT_TENANT, (name, tx.now)) > 0)

    async def tenants(self) -> list[TenantRecord]:
        return [TenantRecord(r["name"], r["created_at"])
                for r in await self._all(self.q.SELECT_TENANTS)]

    async def find_tenant(self, name: str) -> TenantRecord | None:
        r = await self._one(self.q.SELECT_TENANT, (name,))
        return TenantRecord(r["name"], r["created_at"]) if r is not None else None

    async def create_key(self, key_hash: str, name: str, tenant: str, kinds: tuple[str, ...],
                         scopes: frozenset[str] = SCOPES) -> None:
        await self.backend.write(lambda tx: tx.run(self.q.INSERT_KEY, (
            key_hash, name, tenant, ",".join(kinds), tx.now, ",".join(sorted(scopes)))))

    async def find_key(self, key_hash: str) -> ApiKey | None:
        row = await self._one(self.q.SELECT_KEY, (key_hash,))
        if row is None:
            return None
        return ApiKey(row["name"], row["tenant"], rows.split(row["kinds"]), row["key_hash"],
                      frozenset(rows.split(row["scopes"])))

    async def list_keys(self) -> list[KeyRecord]:
        return [_key_record(r) for r in await self._all(self.q.SELECT_KEYS)]

    async def find_key_named(self, name: str) -> KeyRecord | None:
        r = await self._one(self.q.SELECT_KEY_NAMED, (name,))
        return _key_record(r) if r is not None else None

    async def revoke_key(self, name: str) -> bool:
        return await self.backend.write(
            lambda tx: tx.run(self.q.REVOKE_KEY, (tx.now, name)) > 0)

    async def mark_key_used(self, key_hash: str) -> None:
        await self.backend.write(lambda tx: tx.run(self.q.MARK_KEY_USED, (tx.now, key_hash)))

    async def signing_key(self, name: str) -> bytes:
        """The named signing key, made (32 random bytes) the first time it is asked for."""

        def script(tx: Tx) -> bytes:
            tx.run(self.q.INSERT_SIGNING_KEY, (name, secrets.token_bytes(32), tx.now))
            return bytes(tx.value(self.q.SELECT_SIGNING_KEY, (name,)))

        return await self.backend.write(script)

    async def find_signing_key(self, name: str) -> SigningKey | None:
        """The named key if it was made; never makes one (a forged token names any tenant)."""
        row = await self._one(self.q.SELECT_SIGNING_KEY, (name,))
        return _signing_key(row) if row is not None else None

    async def rotate_signing_key(self, name: str, overlap_ms: int) -> SigningKey:
        def script(tx: Tx) -> SigningKey:
            fresh = secrets.token_bytes(32)
            if not tx.run(self.q.INSERT_SIGNING_KEY, (name, fresh, tx.now)):
                tx.run(self.q.ROTATE_SIGNING_KEY, (fresh, tx.now + overlap_ms, tx.now, name))
            row = tx.one(self.q.SELECT_SIGNING_KEY, (name,))
            assert row is not None
            return _signing_key(row)

        return await self.backend.write(script)

    async def end_session(self, nonce: str, until: int) -> None:
        def script(tx: Tx) -> None:
            tx.run(self.q.DELETE_SIGN_OUTS_PAST, (tx.now,))
            tx.run(self.q.INSERT_SIGN_OUT, (nonce, until))

        await self.backend.write(script)

    async def session_ended(self, nonce: str) -> bool:
        return await self._one(self.q.SELECT_SIGN_OUT, (nonce,)) is not None

    # --- recipients ---------------------------------------------------------------------------

    async def put_recipient(self, r: Recipient) -> None:
        await self.edit_recipient(r.tenant, r.user_id, lambda _: r)

    async def edit_recipient(self, tenant: str, user_id: str, edit: RecipientEdit) -> None:
        refused = await self.backend.write(lambda tx: people.edit_recipient(
            tx, tenant, user_id, edit))
        if refused is not None:
            raise refused

    async def get_recipient(self, tenant: str, user_id: str) -> Recipient | None:
        row = await self._one(self.q.SELECT_RECIPIENT, (tenant, user_id))
        addresses = json.loads(row["contacts"]) if row else {}
        disabled = await self._all(self.q.SELECT_SUPPRESSED, (
            tenant, json.dumps(list(addresses.values())))) if addresses else []
        devices = await self._all(self.q.SELECT_DEVICES, (tenant, user_id))
        return rows.recipient(tenant, user_id, row, disabled, devices)

    async def locale_of(self, tenant: str, user_id: str) -> str | None:
        value = await self._value(self.q.SELECT_LOCALE, (tenant, user_id))
        return str(value) if value is not None else None

    async def erase_user(self, tenant: str, user_id: str, by: str) -> Erased:
        erased = await self.backend.write(lambda tx: erasure.erase_user(tx, tenant, user_id, by))
        await self.backend.forget()  # before the answer: nothing of theirs left in the files
        return erased

    async def erased_at(self, tenant: str, user_id: str) -> int | None:
        return rows.as_int(await self._value(self.q.SELECT_ERASED, (tenant, user_id)))

    async def put_device(self, tenant: str, user_id: str, device: Device) -> None:
        await self.backend.write(lambda tx: tx.run(self.q.UPSERT_DEVICE, (
            tenant, user_id, device.device_id, device.kind, device.endpoint, device.p256dh,
            device.auth, tx.now, tx.now)))

    async def delete_device(self, tenant: str, user_id: str, device_id: str) -> bool:
        return await self.backend.write(lambda tx: tx.run(
            self.q.DELETE_DEVICE, (tenant, user_id, device_id)) > 0)

    async def put_preferences(self, tenant: str, user_id: str, preferences: dict[str, Any],
                              version: int | None = None, hours: Hours | None = None
                              ) -> int | None:
        version_now, written = await self.edit_preferences(
            tenant, user_id, lambda _: preferences,
            None if version is None else frozenset({version}), hours)
        return version_now if written else None

    async def edit_preferences(self, tenant: str, user_id: str, edit: PreferencesEdit,
                               if_match: frozenset[int] | None = None,
                               hours: Hours | None = None) -> tuple[int, bool]:
        done = await self.backend.write(lambda tx: people.edit_preferences(
            tx, tenant, user_id, edit, if_match, hours))
        if isinstance(done, DomainError):
            raise done
        return done

    # --- accept, resolve, read ----------------------------------------------------------------

    async def accept(self, inp: AcceptInput, notification_id: str, plan: PlanFn, ttl_sec: int,
                     inbox_item: Inbox = None) -> AcceptResult:
        params = orjson.dumps(inp.params).decode()
        return await self.backend.write(  # past max_queue waiting, refused: 503, retry
            lambda tx: accept.accept(tx, inp, notification_id, params, plan, ttl_sec,
                                     inbox_item), shed=True)

    async def accept_many(self, items: list[Acceptance]) -> list[AcceptResult]:
        params = [orjson.dumps(a.inp.params).decode() for a in items]
        return await self.backend.write(lambda tx: [  # the batch waits, or is shed, as one
            accept.accept(tx, a.inp, a.notification_id, p, a.plan, a.ttl_sec, a.inbox)
            for a, p in zip(items, params, strict=True)], shed=True)

    async def resolve_keys(self, tenant: str, keys: list[tuple[str, str, str]], by: str,
                           kinds: tuple[str, ...] = (),
                           read_kinds: frozenset[str] = frozenset()
                           ) -> list[ResolveResult | None]:
        return await self.backend.write(lambda tx: delivery.resolve_keys(
            tx, tenant, keys, by, kinds, read_kinds))

    async def resolve(self, notification_id: str, resolution: str, by: str,
                      tenant: str | None = None, kinds: tuple[str, ...] = (),
                      read_kinds: frozenset[str] = frozenset()) -> ResolveResult | None:
        return await self.backend.write(lambda tx: delivery.resolve(
            tx, notification_id, resolution, by, tenant, kinds, read_kinds))

    async def find_by_dedup(self, tenant: str, user_id: str, dedup_key: str) -> str | None:
        row = await self._one(self.q.SELECT_DEDUP, (tenant, user_id, dedup_key))
        return str(row["id"]) if row else None

    async def get_notification(self, notification_id: str) -> Notification | None:
        def script(tx: Tx) -> Notification | None:
            q = self.q
            n = tx.one(q.SELECT_NOTIFICATION, (notification_id,))
            if n is None:
                return None
            return rows.notification(
                n, tx.all(q.SELECT_STEPS, (notification_id,)),
                [rows.attempt(a) for a in tx.all(q.SELECT_ATTEMPTS, (notification_id,))],
                tx.all(q.SELECT_EVENTS, (notification_id,)),
                tx.all(q.SELECT_RECEIPTS, (notification_id,)))

        return await self.backend.snapshot(script)

    # --- the delivery engine ----------------------------------------------------------------

    async def claim_due(self, wants: list[Want], lease_ms: int, rules: Rules,
                        budget: Budget | None = None, freeze: FreezeFn | None = None
                        ) -> Claimed:
        return await self.backend.write(lambda tx: delivery.claim_due(
            tx, wants, lease_ms, rules, budget or Budget(), freeze))

    async def freeze(self, frozen: list[Freeze]) -> list[bool]:
        return await self.backend.write(lambda tx: delivery.freeze_steps(tx, frozen))

    async def complete(self, claim: Claim, done: Completion, rules: Rules) -> bool:
        return await self.backend.write(lambda tx: delivery.complete(tx, claim, done, rules))

    async def lapse_leases(self) -> int:
        return await self.backend.write(delivery.lapse_leases)

    async def leased(self) -> Leases:
        row = await self._one(self.q.SELECT_LEASED)
        assert row is not None
        return Leases(int(row[0]), rows.as_int(row[1]))

    def on_due(self, listener: Callable[[list[Due]], None] | None) -> None:
        self.backend.writer.on_due = listener

    async def due_times(self, routes: list[Route], limit: int) -> DueTimes:
        def script(tx: Tx) -> DueTimes:
            times = {r: [int(row[0]) for row in tx.all(
                self.q.SELECT_DUE_TIMES, (r.channel, r.lane, limit))] for r in routes}
            return DueTimes(times, rows.as_int(tx.value(self.q.SELECT_FIRST_LEASE_END)))

        return await self.backend.snapshot(script)

    async def replay(self, notification_id: str, step_no: int | None,
                     by: str | None = None) -> int:
        return await self.backend.write(
            lambda tx: delivery.replay(tx, notification_id, step_no, by))

    async def replay_steps(self, steps: list[StepKey], by: str | None = None) -> int:
        return await self.backend.write(lambda tx: delivery.replay_steps(tx, steps, by))

    async def end_unconfigured(self, channels: list[str], decide: DecideFn) -> list[Decided]:
        return await self.backend.write(lambda tx: delivery.end_unconfigured(
            tx, channels, decide))

    # --- provider evidence and the suppression list ------------------------------------------

    async def record_receipts(self, found: list[Receipt], rules: Rules,
                              once: Nonce | None = None) -> list[Recorded]:
        return await self.backend.write(lambda tx: receipts.record_all(tx, found, rules, once))

    async def suppress(self, tenant: str, channel_type: str, address: str, reason: str,
                       source: str) -> bool:
        if channel_type == "push":  # a device id: its state lives with the device
            return await self.backend.write(lambda tx: tx.run(self.q.KILL_TENANT_DEVICE, (
                reason, tx.now, tenant, address)) > 0)
        return await self.backend.write(lambda tx: tx.run(self.q.SUPPRESS, (
            tenant, channel_type, normal_address(channel_type, address), reason, source, None,
            tx.now)) > 0)

    async def unsuppress(self, tenant: str, channel_type: str, address: str) -> bool:
        if channel_type == "push":
            return await self.backend.write(lambda tx: tx.run(self.q.REVIVE_DEVICE, (
                tx.now, tenant, address)) > 0)
        normal = normal_address(channel_type, address)  # and what an erasure left one-way
        return await self.backend.write(lambda tx: sum(tx.run(self.q.UNSUPPRESS, (
            tenant, channel_type, a)) for a in (
                normal, hashed_address(normal, erasure.suppression_key(tx)))) > 0)

    async def suppressions(self, tenant: str, address: str | None = None,
                           limit: int = 1000) -> list[Suppression]:
        hashed = None
        if address is not None:
            key = await self._value(self.q.SELECT_SIGNING_KEY, (SUPPRESSION_KEY,))
            hashed = hashed_address(address, bytes(key)) if key is not None else None
        found = await self._all(self.q.SELECT_SUPPRESSIONS, {
            "tenant": tenant, "address": address, "limit": limit, "hashed": hashed})
        return [Suppression(r["tenant"], r["channel_type"], r["address"], r["reason"],
                            r["source"], r["evidence"], r["created_at"]) for r in found]

    async def orphan_count(self) -> int:
        return int(await self._value(self.q.COUNT_ORPHANS) or 0)

    # --- the inbox ------------------------------------------------------------------------------

    async def inbox_page(self, tenant: str, user_id: str, before: Cursor | None,
                         limit: int, archived: bool = False,
                         kinds: tuple[str, ...] = ()) -> list[InboxItem]:
        at, nid = (before.created_at, before.notification_id) if before else (FAR, "")
        return [_item(r) for r in await self._all(self.q.SELECT_INBOX_PAGE, (
            tenant, user_id, at, nid, archived, *inbox.of_kinds(kinds), limit))]

    async def inbox_since(self, tenant: str, user_id: str, seq: int,
                          limit: int) -> list[InboxItem]:
        return [_item(r) for r in await self._all(self.q.SELECT_INBOX_SINCE, (
            tenant, user_id, seq, limit))]

    async def badge(self, tenant: str, user_id: str, kinds: tuple[str, ...] = ()) -> int:
        if kinds:  # counted: the kept badge is of every kind
            return int(await self._value(self.q.COUNT_UNREAD_OF_KINDS, (
                tenant, user_id, *inbox.of_kinds(kinds))) or 0)
        return int(await self._value(self.q.SELECT_BADGE, (tenant, user_id)) or 0)

    async def read_item(self, tenant: str, user_id: str, item_id: str,
                        stop_on_read: frozenset[str],
                        kinds: tuple[str, ...] = ()) -> InboxChange | None:
        return await self.backend.write(lambda tx: inbox.read_item(
            tx, tenant, user_id, item_id, stop_on_read, kinds))

    async def read_all(self, tenant: str, user_id: str, stop_on_read: frozenset[str],
                       kinds: tuple[str, ...] = ()) -> InboxChange:
        return await self.backend.write(lambda tx: inbox.read_all(
            tx, tenant, user_id, stop_on_read, kinds))

    async def archive_item(self, tenant: str, user_id: str, item_id: str,
                           kinds: tuple[str, ...] = ()) -> InboxChange | None:
        return await self.backend.write(lambda tx: inbox.archive_item(
            tx, tenant, user_id, item_id, kinds))

    async def rebuild_badges(self) -> int:
        return await self.backend.write(inbox.rebuild_badges)

    # --- digests ------------------------------------------------------------------------------

    async def due_digests(self, now: int, limit: int) -> list[DigestDue]:
        return [DigestDue(r["tenant"], r["user_id"], r["digest_kind"], r["window_end"], r["n"])
                for r in await self._all(self.q.SELECT_DUE_DIGESTS, (now, limit))]

    async def digest_members(self, due: DigestDue) -> list[DigestMember]:
        found = await self._all(self.q.SELECT_DIGEST_MEMBERS, (
            due.tenant, due.user_id, due.digest_kind, due.window_end))
        return [DigestMember(r["notification_id"], r["step_no"], r["kind"],
                             orjson.loads(r["params"]), r["created_at"]) for r in found]

    async def make_digest(self, due: DigestDue, inp: AcceptInput, notification_id: str,
                          plan: PlanFn, ttl_sec: int, inbox_item: Inbox,
                          members: list[StepKey], rollover: int) -> AcceptResult:
        params = orjson.dumps(inp.params).decode()
        return await self.backend.write(lambda tx: accept.make_digest(
            tx, due, inp, notification_id, params, plan, ttl_sec, inbox_item, members,
            rollover))

    async def next_digest_at(self) -> int | None:
        return rows.as_int(await self._value(self.q.NEXT_DIGEST))

    # --- reads ----------------------------------------------------------------------------------

    # --- retention ----------------------------------------------------------------------------

    async def prune(self, what: Aged, window_ms: int, after: str, limit: int) -> Pruned:
        return await self.backend.write(
            lambda tx: retention.prune(tx, what, window_ms, after, limit))

    async def prunable(self, what: Aged, window_ms: int) -> int:
        return await self.backend.snapshot(lambda tx: retention.prunable(tx, what, window_ms))

    async def storage(self, count: bool = True) -> Storage:
        found = await self.backend.snapshot(lambda tx: tx.all(self.q.COUNT_ROWS)) if count else []
        used, free = await self.backend.size()
        return Storage(used, free, {r["class"]: int(r["n"]) for r in found},
                       {r["class"]: _when(r["oldest"]) for r in found})

    async def reclaim(self, max_bytes: int) -> int:
        return int(await self.backend.reclaim(max_bytes))

    async def compact(self) -> None:
        await self.backend.compact()

    async def tune_space(self) -> float | None:
        return await self.backend.tune_space()

    async def _all(self, sql: str, args: Args = ()) -> list[Row]:
        return await self.backend.fetch(sql, args)

    async def _one(self, sql: str, args: Args = ()) -> Row | None:
        found = await self.backend.fetch(sql, args)
        return found[0] if found else None

    async def _value(self, sql: str, args: Args = ()) -> Any:
        row = await self._one(sql, args)
        return row[0] if row is not None else None


def _key_record(r: Row) -> KeyRecord:
    return KeyRecord(r["name"], r["tenant"], rows.split(r["kinds"]), r["created_at"],
                     r["revoked_at"], rows.split(r["scopes"]), r["last_used_at"])


def _signing_key(r: Row) -> SigningKey:
    previous = r["previous"]
    return SigningKey(bytes(r["secret"]), bytes(previous) if previous is not None else None,
                      r["previous_until"])


def _matching(match: DeadMatch) -> dict[str, Any]:
    return {"since": match.since, "until": match.until, "channel": match.channel,
            "kind": match.kind, "tenant": match.tenant}


def _item(r: Row) -> InboxItem:
    return InboxItem(r["seq"], r["notification_id"], r["kind"], r["title"], r["body"],
                     r["created_at"], r["read_at"], r["archived_at"])
