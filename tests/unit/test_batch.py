"""POST /v1/notifications/batch and POST /v1/resolutions/batch: each item answered as the single
call would answer it, in order, in one write; the envelope refused whole; the batch body's own
size limit; a shed or stopping daemon refuses the whole batch before anything is written."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import orjson
import pytest
from support import ALERT_STEPS, START_MS, Api, holding_the_writer, make_config, query, queued

from notifyd.config import Config
from notifyd.core.models import SCOPES
from notifyd.core.text import iso
from notifyd.http.batch import MAX_ITEMS
from notifyd.http.kit import CTX
from notifyd.store.core.store import CoreStore

BATCH_BODY_BYTES = 200_000  # above server.max_body_bytes (65,536), well under the default
BODY = {"user_id": "u1", "kind": "alert", "params": {"invoice": 1}}
ACCEPTS = "/v1/notifications/batch"
RESOLUTIONS = "/v1/resolutions/batch"


@pytest.fixture
def cfg(db_path: Path) -> Config:
    base = make_config(db_path)
    return dataclasses.replace(base, server=dataclasses.replace(
        base.server, max_batch_body_bytes=BATCH_BODY_BYTES))


async def batch(api: Api, items: Any, path: str = ACCEPTS, **kw: Any) -> tuple[int, Any]:
    return await api.call("POST", path, {"items": items}, **kw)


async def test_each_item_gets_the_single_calls_answer_in_order(api: Api) -> None:
    api.key = await api.new_key(kinds=("alert", "fixed"))
    _, kept = await api.post({**BODY, "dedup_key": "kept"})
    items: list[Any] = [
        {**BODY, "dedup_key": "new-1"},  # 202
        {**BODY, "dedup_key": "kept"},  # a retry: 200, the first id
        {**BODY, "dedup_key": "kept", "params": {"invoice": 2}},  # 409 dedup_conflict
        {"kind": "alert"},  # 422 missing_field
        {**BODY, "kind": "page"},  # 403: this key may not post page
        [1, 2],  # not an object: 400, as a body that is not one
        {**BODY, "kind": "nope"},  # 422 unknown_kind
        {**BODY, "send_at": "soon"},  # 422 invalid_field send_at
        {**BODY, "dedup_key": "twice"},  # 202
        {**BODY, "dedup_key": "twice"},  # the same key later in the batch: a retry, 200
        {**BODY, "kind": "fixed"},  # 202, no dedup key
    ]
    status, answer = await batch(api, items)
    assert status == 200
    results = answer["results"]
    assert [r["status"] for r in results] == [202, 200, 409, 422, 403, 400, 422, 422, 202, 200,
                                              202]
    assert results[1] == {"status": 200, **kept, "created": False}
    assert results[9]["notification_id"] == results[8]["notification_id"]
    assert [r.get("error", {}).get("code") for r in results] == [
        None, None, "dedup_conflict", "missing_field", "kind_not_allowed", "body_not_object",
        "unknown_kind", "invalid_field", None, None, None]
    registry = api.client.server.app[CTX].metrics.registry
    assert {result: registry.get_sample_value("notifyd_accepts_total", {"result": result})
            for result in ("created", "retry", "conflict", "refused")} == {
        "created": 4, "retry": 2, "conflict": 1, "refused": 5}  # the kept one's POST, and each item
    for i in (2, 3, 4, 6, 7):  # what the single call answers the same body, word for word
        single_status, single = await api.post(items[i])
        assert {"status": single_status, **single} == results[i], items[i]
    assert api.count("notifications") == 4  # kept, new-1, twice, the fixed one
    assert api.count("steps") == 3 * ALERT_STEPS + 1


async def test_a_batch_is_one_write_answered_after_its_commit(api: Api,
                                                              store: CoreStore) -> None:
    """The writer is held; the batch's whole answer waits for it, then every row is there, read
    on a connection of our own, from the one commit that follows."""
    async with holding_the_writer(store) as release:
        sent = asyncio.ensure_future(batch(api, [{**BODY, "dedup_key": f"d{i}"}
                                                 for i in range(50)]))
        await queued(store, 1)
        await asyncio.sleep(0.05)  # time to answer early, were it going to
        assert not sent.done()
        assert api.count("notifications") == 0
        commits = store.backend.commits
        release()
        status, answer = await sent
    assert status == 200 and {r["status"] for r in answer["results"]} == {202}
    assert store.backend.commits - commits == 2  # the holder's, then the batch's one
    ids = {r["notification_id"] for r in answer["results"]}
    assert {i for (i,) in query(api.db_path, "SELECT id FROM notifications")} == ids
    assert api.count("steps") == 50 * ALERT_STEPS


async def test_a_thousand_items_go_in_one_commit(api: Api, store: CoreStore) -> None:
    commits = store.backend.commits
    status, answer = await batch(api, [{"user_id": f"u{i}", "kind": "fixed"}
                                       for i in range(MAX_ITEMS)])
    assert status == 200 and [r["status"] for r in answer["results"]] == [202] * MAX_ITEMS
    assert store.backend.commits - commits == 1
    assert api.count("notifications") == MAX_ITEMS


ENVELOPES: list[tuple[str, Any, int, str, str | None]] = [
    ("not_json", b"{", 400, "invalid_json", None),
    ("not_object", b"[{}]", 400, "body_not_object", None),
    ("empty_body", b"", 400, "invalid_json", None),
    ("no_items", {}, 422, "missing_field", "items"),
    ("null_items", {"items": None}, 422, "missing_field", "items"),
    ("items_not_list", {"items": {"user_id": "u1"}}, 422, "invalid_field", "items"),
    ("no_item", {"items": []}, 422, "invalid_field", "items"),
    ("too_many", {"items": [BODY] * (MAX_ITEMS + 1)}, 422, "invalid_field", "items"),
    ("unknown_field", {"items": [BODY], "mode": "all"}, 422, "unknown_field", "mode"),
]


@pytest.mark.parametrize("path", [ACCEPTS, RESOLUTIONS])
@pytest.mark.parametrize(("body", "status", "code", "field"), [e[1:] for e in ENVELOPES],
                         ids=[e[0] for e in ENVELOPES])
async def test_a_bad_envelope_is_refused_whole(api: Api, path: str, body: Any, status: int,
                                               code: str, field: str | None) -> None:
    raw = body if isinstance(body, bytes) else None
    got, answer = await api.call("POST", path, None if raw else body, raw=raw)
    assert (got, answer["error"]["code"], answer["error"]["field"]) == (status, code, field)
    assert api.count("notifications") == 0


async def test_the_batch_body_has_its_own_size_limit(api: Api) -> None:
    blob = "x" * 1000
    items = [{**BODY, "params": {"blob": blob}} for _ in range(100)]  # ~110 kB: over 64 KiB
    status, answer = await batch(api, items)
    assert status == 200 and len(answer["results"]) == 100
    status, single = await api.post({**BODY, "params": {"blob": "x" * 70_000}})
    assert (status, single["error"]["code"]) == (413, "body_too_large")  # the others keep theirs
    status, answer = await batch(api, items * 2)  # ~220 kB: over server.max_batch_body_bytes
    assert (status, answer["error"]["code"]) == (413, "body_too_large")
    assert "server.max_batch_body_bytes (200000 bytes)" in answer["error"]["message"]
    assert api.count("notifications") == 100


async def test_an_idempotency_key_header_is_refused_for_a_batch(api: Api) -> None:
    status, answer = await batch(api, [BODY], headers={"Idempotency-Key": "k"})
    assert (status, answer["error"]["code"], answer["error"]["field"]) == (
        422, "invalid_field", "Idempotency-Key")
    assert api.count("notifications") == 0


@pytest.mark.parametrize(("path", "scope"), [(ACCEPTS, "post"), (RESOLUTIONS, "resolve")])
async def test_the_key_and_its_scope_are_checked_once_for_the_batch(
        api: Api, path: str, scope: str) -> None:
    status, answer = await batch(api, [BODY], path, key="nfy_unknown")
    assert (status, answer["error"]["code"]) == (401, "unauthorized")
    key = await api.new_key(scopes=SCOPES - {scope})
    status, answer = await batch(api, [BODY], path, key=key)
    assert (status, answer["error"]["code"]) == (403, "scope_not_allowed")


async def test_a_store_that_sheds_refuses_the_whole_batch(api: Api, store: CoreStore) -> None:
    store.backend.writer.max_queue = 1
    async with holding_the_writer(store) as release:
        waiting = asyncio.ensure_future(api.post({**BODY, "dedup_key": "first"}))
        await queued(store, 1)
        status, answer = await batch(api, [{**BODY, "dedup_key": f"d{i}"} for i in range(3)])
        release()
        assert (await waiting)[0] == 202
    assert (status, answer["error"]["code"]) == (503, "overloaded")
    assert api.count("notifications") == 1  # the single accept that waited, none of the batch


async def test_a_stopping_daemon_refuses_the_batch(api: Api) -> None:
    api.client.server.app[CTX].draining = True
    status, answer = await batch(api, [BODY])
    assert (status, answer["error"]["code"]) == (503, "shutting_down")


async def test_scheduled_items_in_a_batch(api: Api) -> None:
    send_at = START_MS + 3_600_000
    status, answer = await batch(api, [{**BODY, "send_at": iso(send_at)},
                                       {**BODY, "send_at": iso(START_MS + 40 * 86_400_000)}])
    assert [r["status"] for r in answer["results"]] == [202, 422]
    assert answer["results"][1]["error"]["field"] == "send_at"
    n = await api.record(answer["results"][0]["notification_id"])
    assert (n.send_at, n.steps[0].send_after) == (send_at, send_at)


# --- resolutions --------------------------------------------------------------------------


async def test_each_resolution_gets_the_single_calls_answer_in_order(api: Api) -> None:
    api.key = await api.new_key(kinds=("alert",))
    other = await api.new_key()
    await api.post({**BODY, "dedup_key": "a"})
    await api.post({**BODY, "dedup_key": "b", "send_at": iso(START_MS + 3_600_000)})
    await api.post({**BODY, "kind": "fixed", "dedup_key": "f"}, key=other)
    api.clock.advance(5)
    items: list[Any] = [
        {"user_id": "u1", "dedup_key": "a", "resolution": "paid"},  # 200, changed
        {"user_id": "u1", "dedup_key": "a", "resolution": "again"},  # 200, the first wins
        {"user_id": "u1", "dedup_key": "b"},  # scheduled, not yet due: every step cancelled
        {"user_id": "u1", "dedup_key": "nope"},  # 404
        {"user_id": "u1", "dedup_key": "f"},  # a kind this key may not see: 404
        {"user_id": "u1"},  # 422 missing_field dedup_key
        {"user_id": "u1", "dedup_key": "a", "why": "x"},  # 422 unknown_field
        "u1:a",  # 400
    ]
    status, answer = await batch(api, items, RESOLUTIONS)
    assert status == 200
    results = answer["results"]
    at = iso(START_MS + 5_000)
    assert results[:3] == [
        {"status": 200, "notification_id": results[0]["notification_id"], "resolution": "paid",
         "resolved_at": at, "changed": True, "cancelled_steps": ALERT_STEPS},
        {"status": 200, "notification_id": results[0]["notification_id"], "resolution": "paid",
         "resolved_at": at, "changed": False, "cancelled_steps": 0},
        {"status": 200, "notification_id": results[2]["notification_id"],
         "resolution": "resolved", "resolved_at": at, "changed": True,
         "cancelled_steps": ALERT_STEPS}]
    assert [r["status"] for r in results[3:]] == [404, 404, 422, 422, 400]
    for i in (1, 3, 4, 5, 6):  # what the single call answers the same body, word for word
        single_status, single = await api.call("POST", "/v1/resolutions", items[i])
        assert {"status": single_status, **single} == results[i], items[i]
    n = await api.record(results[2]["notification_id"])
    assert {s.state for s in n.steps} == {"cancelled"}


async def test_a_resolution_batch_is_one_write(api: Api, store: CoreStore) -> None:
    for i in range(20):
        await api.post({**BODY, "dedup_key": f"d{i}"})
    commits = store.backend.commits
    status, answer = await batch(api, [{"user_id": "u1", "dedup_key": f"d{i}"}
                                       for i in range(20)], RESOLUTIONS)
    assert status == 200 and all(r["changed"] for r in answer["results"])
    assert store.backend.commits - commits == 1
    assert query(api.db_path, "SELECT count(*) FROM notifications WHERE resolved_at IS NULL"
                 ) == [(0,)]



async def test_an_item_nested_deep_is_refused_in_its_place(api: Api) -> None:
    """Nesting msgspec does not read raw (nearly orjson's 1,024 levels) is read as JSON: the
    batch is still answered item by item, the deep one refused as its single call would be."""
    deep = b'{"a":' * 999 + b"1" + b"}" * 999
    body = b'{"items": [' + orjson.dumps(BODY) + b', {"user_id": "u1", "kind": "alert", ' \
        b'"params": ' + deep + b"}]}"
    status, answer = await api.call("POST", ACCEPTS, raw=body)
    assert status == 200
    assert [(r["status"], r.get("error", {}).get("field")) for r in answer["results"]] == [
        (202, None), (422, "params")]
    assert api.count("notifications") == 1


async def test_a_number_json_cannot_hold_in_an_item_refuses_the_whole_batch(api: Api) -> None:
    """1e400 is no JSON number orjson reads: the body is not JSON, as for a single call."""
    body = b'{"items": [' + orjson.dumps(BODY) + b', {"user_id": "u1", "kind": "alert", ' \
        b'"params": {"n": 1e400}}]}'
    status, answer = await api.call("POST", ACCEPTS, raw=body)
    assert (status, answer["error"]["code"]) == (400, "invalid_json")
    assert api.count("notifications") == 0
