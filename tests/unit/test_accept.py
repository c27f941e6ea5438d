"""POST /v1/notifications: durable accept, dedup under races, the error matrix, tenant scoping."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support import ALERT_STEPS, START_MS, Api

from notifyd.http.errors import CATALOG

BODY = {"user_id": "u1", "kind": "alert", "params": {"invoice": 1009}}


async def test_accept_writes_the_notification_and_its_whole_ladder(api: Api) -> None:
    status, body = await api.post({**BODY, "dedup_key": "inv-1009"})
    assert status == 202
    assert body == {"notification_id": body["notification_id"], "state": "log_pending",
                    "created": True}
    steps = [(s.step_no, s.channel, s.lane, s.send_after, s.state)
             for s in (await api.record(body["notification_id"])).steps]
    assert steps == [(0, "log", "bulk", START_MS, "pending"),
                     (1, "sms", "bulk", START_MS + 30_000, "pending"),
                     (2, "email", "bulk", START_MS + 90_000, "pending")]


async def test_a_retry_returns_the_same_notification(api: Api) -> None:
    _, first = await api.post({**BODY, "dedup_key": "inv-1"})
    api.clock.advance(5)
    status, again = await api.post({**BODY, "dedup_key": "inv-1"})
    assert status == 200
    assert again == {**first, "created": False}
    assert api.count("notifications") == 1
    assert api.count("steps") == ALERT_STEPS


async def test_idempotency_key_header_is_the_dedup_key(api: Api) -> None:
    _, first = await api.post(BODY, headers={"Idempotency-Key": "req-7"})
    status, again = await api.post({**BODY, "dedup_key": "req-7"})
    assert status == 200 and again["notification_id"] == first["notification_id"]
    assert (await api.record(first["notification_id"])).dedup_key == "req-7"


async def test_no_dedup_key_means_no_dedup(api: Api) -> None:
    _, a = await api.post(BODY)
    _, b = await api.post(BODY)
    assert a["notification_id"] != b["notification_id"]


async def test_same_key_different_input_conflicts(api: Api) -> None:
    await api.post({**BODY, "dedup_key": "inv-2"})
    status, body = await api.post({**BODY, "dedup_key": "inv-2", "params": {"invoice": 2}})
    assert status == 409
    assert body["error"]["code"] == "dedup_conflict"
    assert body["error"]["field"] == "dedup_key"
    assert api.count("notifications") == 1


async def test_64_concurrent_retries_make_one_notification(api: Api) -> None:
    answers = await asyncio.gather(*(api.post({**BODY, "dedup_key": "race"}) for _ in range(64)))
    ids = {body["notification_id"] for _, body in answers}
    assert len(ids) == 1
    assert sorted(status for status, _ in answers) == [200] * 63 + [202]
    assert sum(body["created"] for _, body in answers) == 1
    assert api.count("notifications") == 1
    assert api.count("steps") == ALERT_STEPS


BIG = {**BODY, "params": {"blob": "x" * 70_000}}
ERRORS: list[tuple[str, Any, str, str | None]] = [
    # (name, body or raw bytes, code, field)
    ("bad_json", b"{not json", "invalid_json", None),
    ("array", b"[1, 2]", "body_not_object", None),
    ("empty", b"", "invalid_json", None),
    ("not_utf8", b'{"user_id": "\xff"}', "invalid_json", None),
    ("too_large", json.dumps(BIG).encode(), "body_too_large", None),
    ("no_user", {"kind": "alert"}, "missing_field", "user_id"),
    ("no_kind", {"user_id": "u1"}, "missing_field", "kind"),
    ("user_int", {**BODY, "user_id": 5}, "invalid_field", "user_id"),
    ("params_list", {**BODY, "params": [1]}, "invalid_field", "params"),
    ("ttl_str", {**BODY, "max_ttl_sec": "1h"}, "invalid_field", "max_ttl_sec"),
    ("ttl_bool", {**BODY, "max_ttl_sec": True}, "invalid_field", "max_ttl_sec"),
    ("dedup_int", {**BODY, "dedup_key": 7}, "invalid_field", "dedup_key"),
    ("chain_str", {**BODY, "fallback_chain": "sms"}, "invalid_field", "fallback_chain"),
    ("unknown_field", {**BODY, "priority": 1}, "unknown_field", "priority"),
    ("unknown_kind", {**BODY, "kind": "nope"}, "unknown_kind", "kind"),
    ("unknown_channel", {**BODY, "fallback_chain": [{"channel": "pigeon"}]},
     "unknown_channel", "fallback_chain[0].channel"),
    ("chain_gap", {**BODY, "fallback_chain": [{"channel": "sms"}, {"channel": "log"}]},
     "invalid_field", "fallback_chain[0].timeout_sec"),
    ("no_override", {**BODY, "kind": "fixed", "fallback_chain": [{"channel": "sms"}]},
     "override_not_allowed", "fallback_chain"),
]


@pytest.mark.parametrize(("body", "code", "field"), [e[1:] for e in ERRORS],
                         ids=[e[0] for e in ERRORS])
async def test_bad_requests_get_a_catalog_error_and_write_nothing(
        api: Api, body: Any, code: str, field: str | None) -> None:
    await api.post({**BODY, "dedup_key": "kept"})  # something already there
    before = (api.count("notifications"), api.count("steps"))
    raw = body if isinstance(body, bytes) else None
    status, answer = await api.post(None if raw else body, raw=raw)
    assert (status, answer["error"]["code"]) == (CATALOG[code].status, code)
    assert answer["error"]["field"] == field
    assert answer["error"]["message"]
    assert (api.count("notifications"), api.count("steps")) == before


async def test_deeply_nested_json_is_invalid_json_not_a_crash(api: Api) -> None:
    status, answer = await api.post(None, raw=b"[" * 50_000)
    assert (status, answer["error"]["code"]) == (400, "invalid_json")


async def test_idempotency_key_and_a_different_dedup_key_conflict(api: Api) -> None:
    status, answer = await api.post({**BODY, "dedup_key": "a"}, headers={"Idempotency-Key": "b"})
    assert (status, answer["error"]["code"], answer["error"]["field"]) == (
        422, "invalid_field", "dedup_key")
    assert api.count("notifications") == 0


@pytest.mark.parametrize(("max_ttl", "ttl_sec"), [(None, 86400), (60, 60), (999_999, 86400)])
async def test_max_ttl_sec_only_shortens_the_kinds_ttl(api: Api, max_ttl: int | None,
                                                        ttl_sec: int) -> None:
    body = BODY if max_ttl is None else {**BODY, "max_ttl_sec": max_ttl}
    status, answer = await api.post(body)
    assert status == 202
    n = await api.record(answer["notification_id"])
    assert n.expires_at - n.created_at == ttl_sec * 1000


async def test_one_requests_shorter_ttl_leaves_the_next_requests_of_its_kind_alone(
        api: Api) -> None:
    for n, (max_ttl, ttl_sec) in enumerate([(None, 86400), (60, 60), (None, 86400)]):
        body = {**BODY, "dedup_key": f"k{n}"}
        status, answer = await api.post(body if max_ttl is None else
                                         {**body, "max_ttl_sec": max_ttl})
        assert status == 202
        made = await api.record(answer["notification_id"])
        assert made.expires_at - made.created_at == ttl_sec * 1000


@pytest.mark.parametrize("auth", [None, "Bearer nfy_not-a-key", "Basic abc"])
async def test_no_or_unknown_key_is_unauthorized(api: Api, auth: str | None) -> None:
    headers = {"Authorization": auth} if auth else {}
    async with api.client.post("/v1/notifications", json=BODY, headers=headers) as resp:
        assert resp.status == 401
        assert (await resp.json())["error"]["code"] == "unauthorized"
    assert api.count("notifications") == 0


async def test_a_key_may_post_only_its_kinds(api: Api) -> None:
    key = await api.new_key(kinds=("fixed",))
    status, body = await api.post(BODY, key=key)
    assert (status, body["error"]["code"], body["error"]["field"]) == (
        403, "kind_not_allowed", "kind")
    status, _ = await api.post({**BODY, "kind": "fixed"}, key=key)
    assert status == 202
    assert api.count("notifications") == 1


async def test_fallback_chain_replaces_the_ladder(api: Api) -> None:
    chain = [{"channel": "email", "timeout_sec": 10}, {"channel": "log"}]
    _, body = await api.post({**BODY, "fallback_chain": chain})
    steps = [(s.channel, s.send_after) for s in (await api.record(body["notification_id"])).steps]
    assert steps == [("email", START_MS), ("log", START_MS + 10_000)]


async def test_another_tenants_notification_is_not_found(api: Api) -> None:
    _, body = await api.post(BODY)
    other = await api.new_key(tenant="globex")
    path = f"/v1/notifications/{body['notification_id']}"
    status, answer = await api.get(path, key=other)
    assert (status, answer["error"]["code"]) == (404, "not_found")
    status, answer = await api.call("POST", f"{path}/resolve", {}, key=other)
    assert (status, answer["error"]["code"]) == (404, "not_found")
    status, _ = await api.get(path)
    assert status == 200


async def test_same_user_and_dedup_key_under_two_tenants_are_two_notifications(api: Api) -> None:
    other = await api.new_key(tenant="globex")
    s1, a = await api.post({**BODY, "dedup_key": "d"})
    s2, b = await api.post({**BODY, "dedup_key": "d"}, key=other)
    assert (s1, s2) == (202, 202)
    assert a["notification_id"] != b["notification_id"]
    assert [(await api.record(x["notification_id"])).tenant for x in (a, b)] == [
        "acme", "globex"]


async def test_resolution_by_dedup_key_stays_in_the_tenant(api: Api) -> None:
    other = await api.new_key(tenant="globex")
    await api.post({**BODY, "dedup_key": "d"})
    status, answer = await api.call("POST", "/v1/resolutions",
                                    {"user_id": "u1", "dedup_key": "d"}, key=other)
    assert (status, answer["error"]["code"]) == (404, "not_found")


async def test_params_may_nest_32_levels_and_no_deeper(api: Api) -> None:
    def body(depth: int) -> bytes:  # by hand: json.dumps itself stops near 1,000 levels
        params = '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)
        return f'{{"user_id": "u1", "kind": "alert", "params": {params}}}'.encode()

    assert (await api.post(None, raw=body(32)))[0] == 202
    for depth in (33, 300, 1000):  # orjson parses 1,024 levels but writes only 254: a 500 before
        status, answer = await api.post(None, raw=body(depth))
        assert (status, answer["error"]["code"], answer["error"]["field"]) == (
            422, "invalid_field", "params")


async def test_an_idempotency_key_that_is_not_utf8_is_a_400_class_error(api: Api) -> None:
    raw = json.dumps({"user_id": "u1", "kind": "alert"}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", api.client.server.port)
    writer.write(b"POST /v1/notifications HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                 + api.key.encode() + b"\r\nContent-Type: application/json\r\n"
                 b"Idempotency-Key: \xff\xfekey\r\nConnection: close\r\n"
                 + f"Content-Length: {len(raw)}\r\n\r\n".encode() + raw)
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 422 ")
    assert json.loads(body)["error"]["field"] == "Idempotency-Key"
