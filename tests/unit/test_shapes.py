"""The API's shapes (notifyd/shapes): msgspec's refusals told in the API's codes and words, made
from each field's declared constraints; the client's types made from the same Structs."""

from __future__ import annotations

import hashlib
import typing
from pathlib import Path
from typing import Any

import msgspec
import orjson
import pytest

from notifyd.core.errors import DomainError
from notifyd.domain.validate import request_hash
from notifyd.shapes import common, events, notifications, people
from notifyd.shapes.common import Id
from notifyd.shapes.decode import convert, decode
from notifyd.shapes.events import EventId, EventRequest, MembersRequest
from notifyd.shapes.notifications import AcceptBatch, AcceptRequest
from notifyd.shapes.people import PreferencesPatch, PreferencesRequest, User, WebPushDevice
from notifyd.shapes.typed import REGENERATE, render

ROOT = Path(__file__).resolve().parents[2]
KNOWN = "dedup_key, fallback_chain, kind, max_ttl_sec, params, send_at, user_id"
QUIET = "quiet_hours must be {start: 'HH:MM', end: 'HH:MM'} or null"
MEDIA = "a map of mediums (email, sms, push, chat) to true"


def structs() -> list[type[msgspec.Struct]]:
    return [v for m in (common, notifications, people, events) for v in vars(m).values()
            if isinstance(v, type) and issubclass(v, msgspec.Struct) and v.__module__.startswith(
                "notifyd.shapes")]


REFUSALS: list[tuple[Any, bytes, str, str | None, str]] = [
    # (shape, body, code, field, message)
    (AcceptRequest, b'{"kind": "k"}', "missing_field", "user_id", "user_id is required"),
    (AcceptRequest, b'{"user_id": null, "kind": "k"}', "missing_field", "user_id",
     "user_id is required"),
    (AcceptRequest, b'{"user_id": 5, "kind": "k"}', "invalid_field", "user_id",
     "user_id must be a non-empty string of at most 256 characters"),
    (AcceptRequest, b'{"user_id": "u", "kind": "k", "priority": 1}', "unknown_field",
     "priority", f"unknown field 'priority'; known: {KNOWN}"),
    (AcceptRequest, b'{"user_id": "u", "kind": "k", "params": null}', "invalid_field",
     "params", "params must be an object"),
    (AcceptRequest, b'{"user_id": "u", "kind": "k", "max_ttl_sec": true}', "invalid_field",
     "max_ttl_sec", "max_ttl_sec must be an integer 1..2592000"),
    (AcceptRequest, b'{"user_id": "u", "kind": "k", "fallback_chain": []}', "invalid_field",
     "fallback_chain", "fallback_chain must be a list of 1..16 steps"),
    (AcceptRequest, b'{"user_id": "u", "kind": "k", "fallback_chain": ["sms"]}',
     "invalid_field", "fallback_chain[0]", "fallback_chain[0] must be an object"),
    (AcceptRequest, b'{"user_id": "u", "kind": "k", "fallback_chain": [{"channel": "a", '
     b'"timeout_sec": -1}]}', "invalid_field", "fallback_chain[0].timeout_sec",
     "fallback_chain[0].timeout_sec must be a number 0..2592000 or null"),
    (AcceptRequest, b'{"user_id": "u", "kind": "k", "send_at": 7}', "invalid_field", "send_at",
     "send_at must be an RFC 3339 date-time with its offset, such as 2026-09-21T14:13:20Z"),
    (AcceptRequest, b'[1, 2]', "body_not_object", None, "the request body must be a JSON object"),
    (AcceptRequest, b'{"user_id": 5, oops', "invalid_json", None,
     "the request body is not valid JSON"),  # not JSON, wherever msgspec stopped
    (AcceptRequest, b"[" * 50_000, "invalid_json", None, "the request body is not valid JSON"),
    (AcceptBatch, b'{"items": {}}', "invalid_field", "items",
     "items must be a list of 1..1000 items"),
    (User, b'{"quiet_hours": {"start": 22, "end": 7}}', "invalid_field", "quiet_hours", QUIET),
    (User, b'{"quiet_hours": {"start": "22:00"}}', "invalid_field", "quiet_hours", QUIET),
    (User, b'{"email": "not an address"}', "invalid_field", "email",
     "email must be an email address like name@example.com"),
    (PreferencesRequest, b'{"categories": {"news": {"sms": true}, "alert": {"fax": true}}}',
     "invalid_field", "categories.alert", f"categories.alert must be {MEDIA} or false"),
    (PreferencesPatch, b'{"categories": {"alert": {"sms": "off"}}}', "invalid_field",
     "categories.alert", f"categories.alert must be {MEDIA}, false or null"),
    (WebPushDevice, b'{"endpoint": "https://x/y", "keys": {"p256dh": "no spaces!", '
     b'"auth": "x"}}', "invalid_field", "keys",
     "keys must be {p256dh, auth} from the subscription, each base64url"),
    (EventRequest, b'{"event_id": "e", "type": "t", "audience": {"everyone": false}}',
     "invalid_field", "audience.everyone", "audience.everyone must be true"),
    (EventRequest, b'{"event_id": "e", "type": "t", "audience": {"users": []}}',
     "unknown_field", "audience.users", "unknown field 'users'; known: everyone, topic, user_ids"),
    (EventRequest, b'{"event_id": "e", "type": "t", "audience": 5}', "invalid_field",
     "audience", 'audience must be one of {"user_ids": [...]}, {"topic": "name"} or '
                 '{"everyone": true}'),
    (MembersRequest, b'{"add": ["a", ""]}', "invalid_field", "add[1]",
     "add[1] must be a non-empty string of at most 256 characters"),
]


@pytest.mark.parametrize(("shape", "body", "code", "field", "message"), REFUSALS,
                         ids=[f"{r[0].__name__}:{r[3]}:{r[2]}" for r in REFUSALS])
def test_a_refusal_names_the_field_in_the_apis_words(shape: Any, body: bytes, code: str,
                                                     field: str | None, message: str) -> None:
    with pytest.raises(DomainError) as e:
        decode(body, shape)
    assert (e.value.code, e.value.field, e.value.message) == (code, field, message)


def test_a_path_segment_is_checked_as_a_body_field_is() -> None:
    with pytest.raises(DomainError) as e:
        convert("u" * 257, Id, "user_id")
    assert (e.value.code, e.value.field, e.value.message) == (
        "invalid_field", "user_id", "user_id must be a non-empty string of at most 256 "
                                    "characters")
    with pytest.raises(DomainError) as e:
        convert("has/slash", EventId, "event_id")
    assert e.value.field == "event_id" and "letters, digits" in e.value.message


def test_json_nested_past_what_msgspec_walks_is_read_by_orjson() -> None:
    params = '{"a":' * 999 + "1" + "}" * 999
    body = f'{{"user_id": "u", "kind": "k", "params": {params}}}'.encode()
    assert decode(body, AcceptRequest).user_id == "u"  # its depth is the rules' to refuse
    with pytest.raises(DomainError) as e:  # past orjson's 1,024 levels: not JSON it reads
        decode(body.replace(b'"params": ', b'"params": ' + b'{"a":' * 100).replace(
            b"}}", b"}}" + b"}" * 100, 1), AcceptRequest)
    assert e.value.code == "invalid_json"


def test_a_batch_nested_deep_is_read_item_by_item() -> None:
    deep = '{"a":' * 999 + "1" + "}" * 999
    body = f'{{"items": [{{"params": {deep}}}, 7]}}'.encode()
    items = decode(body, AcceptBatch, deep=common.AnyItems).items
    assert len(items) == 2 and items[1] == 7


def test_params_with_an_integer_past_64_bits_hash_as_orjson_read_them() -> None:
    """msgspec keeps 10**30 whole; orjson, which read every body before, made it a float: the
    params kept and the request's hash stay what they were."""
    req = decode(b'{"user_id": "u", "kind": "k", "params": {"n": 1000000000000000000000000000000}}',
                 AcceptRequest)
    params, digest = request_hash(["u", "k", req.params, None, None], 2)
    before = orjson.loads(b'{"n": 1000000000000000000000000000000}')
    assert params == before and isinstance(params["n"], float)
    assert digest == hashlib.sha256(orjson.dumps(["u", "k", before, None, None],
                                                 option=orjson.OPT_SORT_KEYS)).hexdigest()


def requests() -> list[type[msgspec.Struct]]:
    return [s for s in structs() if issubclass(s, common.Body)]


def test_every_request_refuses_a_member_it_does_not_name() -> None:
    assert len(requests()) > 15
    assert [s.__name__ for s in requests()
            if not s.__struct_config__.forbid_unknown_fields] == []


def _metas(tp: Any) -> list[msgspec.Meta]:
    found: list[msgspec.Meta] = []
    if typing.get_origin(tp) is typing.Annotated:
        found += [m for m in tp.__metadata__ if isinstance(m, msgspec.Meta)]
    for arg in typing.get_args(tp):
        found += _metas(arg)
    return found


def test_a_pattern_is_never_what_a_refusal_says() -> None:
    """A regex is no message: each field of a request checked by one has words (Meta extra
    `shape`) for it, on itself or on the whole value it is in."""
    checked, unsaid = 0, []
    for struct in requests():
        for f in msgspec.structs.fields(struct):
            metas = _metas(f.type)
            said = any(m.extra and ("shape" in m.extra or "whole" in m.extra) for m in metas)
            if any(m.pattern for m in metas):
                checked += 1
                if not said and not _inside_whole(struct):
                    unsaid.append(f"{struct.__name__}.{f.name}")
    assert checked > 5 and unsaid == []


def _inside_whole(struct: type[msgspec.Struct]) -> bool:
    """Whether every field of a Struct holding `struct` reports it whole."""
    holders = [(s, f) for s in requests() for f in msgspec.structs.fields(s)
               if struct.__name__ in repr(f.type)]
    return bool(holders) and all(
        any(m.extra and m.extra.get("whole") for m in _metas(f.type)) for _, f in holders)


def test_the_client_types_are_made_from_the_shapes() -> None:
    assert (ROOT / "notifyd/client/types.py").read_text() == render(), (
        f"notifyd/client/types.py is stale; regenerate it: {REGENERATE}")
