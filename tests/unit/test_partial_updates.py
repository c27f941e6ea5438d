"""PATCH /v1/users/{id} and .../preferences: JSON merge patches (RFC 7396) applied inside the
write; the preferences' version as their ETag, and If-Match turning two pages' edits into a
conflict (412) instead of one silently overwriting the other."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support import Api, holding_the_writer

USER = {"email": "ada@example.com", "phone": "+15550100", "timezone": "Europe/Paris",
        "locale": "fr-FR", "quiet_hours": {"start": "22:00", "end": "07:30"}}
PREFS = "/v1/users/u1/preferences"


async def call(api: Api, method: str, path: str, body: Any = None,
               **headers: str) -> tuple[int, Any, str | None]:
    """(status, json, ETag) of one call with the test's key."""
    sent = {"Authorization": f"Bearer {api.key}", **{k.replace("_", "-"): v
                                                     for k, v in headers.items()}}
    async with api.client.request(method, path, json=body, headers=sent) as r:
        return r.status, await r.json(), r.headers.get("ETag")


async def test_a_patch_changes_what_it_names_and_keeps_the_rest(api: Api) -> None:
    await api.call("PUT", "/v1/users/u1", USER)
    status, body = await api.call("PATCH", "/v1/users/u1", {"timezone": "America/New_York"})
    assert status == 200
    assert body == {"user_id": "u1", **USER, "timezone": "America/New_York",
                    "disabled_contacts": {}, "devices": []}
    assert (await api.get("/v1/users/u1"))[1] == body


async def test_null_clears_a_field_and_objects_merge(api: Api) -> None:
    await api.call("PUT", "/v1/users/u1", USER)
    status, body = await api.call("PATCH", "/v1/users/u1", {
        "phone": None, "quiet_hours": {"end": "06:00"}, "locale": None})
    assert status == 200
    assert "phone" not in body and body["email"] == USER["email"] and body["locale"] is None
    assert body["quiet_hours"] == {"start": "22:00", "end": "06:00"}
    status, body = await api.call("PATCH", "/v1/users/u1", {"quiet_hours": None})
    assert (status, body["quiet_hours"]) == (200, None)


async def test_a_patch_makes_a_profile_that_was_not_there(api: Api) -> None:
    status, body = await api.call("PATCH", "/v1/users/u2", {"email": "Bo@Example.com"})
    assert (status, body["email"], body["timezone"]) == (200, "bo@example.com", None)


@pytest.mark.parametrize(("patch", "status", "code", "field"), [
    ({"timezone": "Mars/Olympus"}, 422, "invalid_field", "timezone"),
    ({"quiet_hours": {"start": "25:00"}}, 422, "invalid_field", "quiet_hours"),
    ({"chat": "4242"}, 422, "unknown_field", "chat"),
    ({"timezon": None}, 422, "unknown_field", "timezon"),  # a typo would change nothing
    ({"quiet_hours": {"middle": None}}, 422, "invalid_field", "quiet_hours"),
])
async def test_a_bad_patch_changes_nothing(api: Api, patch: dict[str, Any], status: int,
                                           code: str, field: str) -> None:
    await api.call("PUT", "/v1/users/u1", USER)
    got, body = await api.call("PATCH", "/v1/users/u1", patch)
    assert (got, body["error"]["code"], body["error"]["field"]) == (status, code, field)
    assert (await api.get("/v1/users/u1"))[1] == {"user_id": "u1", **USER,
                                                  "disabled_contacts": {}, "devices": []}


@pytest.mark.parametrize("raw", [b"", b"[]", b'"x"'])
async def test_a_patch_must_be_an_object(api: Api, raw: bytes) -> None:
    status, body = await api.call("PATCH", "/v1/users/u1", raw=raw)
    assert (status, body["error"]["code"]) == (400, "body_not_object")


async def test_two_patches_at_once_both_hold(api: Api) -> None:
    """Each is applied to the profile as its own write reads it: neither loses the other."""
    await api.call("PUT", "/v1/users/u1", USER)
    async with holding_the_writer(api.store) as release:
        first = asyncio.ensure_future(api.call("PATCH", "/v1/users/u1", {"locale": "de"}))
        second = asyncio.ensure_future(api.call("PATCH", "/v1/users/u1", {"phone": None}))
        await asyncio.sleep(0.05)  # both read nothing yet: the writer holds their writes
        release()
        assert [s for s, _ in await asyncio.gather(first, second)] == [200, 200]
    body = (await api.get("/v1/users/u1"))[1]
    assert (body["locale"], "phone" in body, body["email"]) == ("de", False, USER["email"])


async def test_preferences_carry_their_version_as_an_etag(api: Api) -> None:
    status, body, tag = await call(api, "GET", PREFS)
    assert (status, body["version"], tag) == (200, 0, '"0"')
    status, body, tag = await call(api, "PUT", PREFS, {"categories": {"alert": {"sms": False}}})
    assert (status, body["version"], tag) == (200, 1, '"1"')


async def test_a_preferences_patch_changes_only_what_it_names(api: Api) -> None:
    await call(api, "PUT", PREFS, {"opt_out": False, "categories": {
        "alert": {"sms": False}, "page": {"email": False}}})
    status, body, tag = await call(api, "PATCH", PREFS, {"categories": {
        "alert": {"email": False}, "page": None}})
    assert (status, tag) == (200, '"2"')
    assert (body["categories"]["alert"]["sms"], body["categories"]["alert"]["email"]) == (
        False, False)
    assert body["categories"]["page"]["email"] is True  # null: back to its default
    status, body, _ = await call(api, "PATCH", PREFS, {"opt_out": True})
    assert (status, body["opt_out"], body["categories"]["alert"]["sms"]) == (200, True, False)
    status, body, _ = await call(api, "PATCH", PREFS, {"categories": {"nope": {"sms": False}}})
    assert (status, body["error"]["field"]) == (422, "categories.nope")


async def test_two_tabs_editing_at_once_conflict_instead_of_overwriting(api: Api) -> None:
    _, _, seen = await call(api, "GET", PREFS)  # both tabs show version 0
    assert seen == '"0"'
    status, _, tag = await call(api, "PATCH", PREFS, {"categories": {"alert": {"sms": False}}},
                                If_Match=seen)
    assert (status, tag) == (200, '"1"')
    status, body, _ = await call(api, "PATCH", PREFS, {"opt_out": True}, If_Match=seen)
    assert (status, body["error"]["code"], body["error"]["field"]) == (
        412, "precondition_failed", "If-Match")
    assert 'ETag "1"' in body["error"]["message"]
    status, body, _ = await call(api, "PUT", PREFS, {"opt_out": True}, If_Match=seen)
    assert status == 412  # PUT too
    _, body, _ = await call(api, "GET", PREFS)
    assert (body["version"], body["opt_out"], body["categories"]["alert"]["sms"]) == (
        1, False, False)  # the first tab's change stands, nothing else
    status, body, tag = await call(api, "PATCH", PREFS, {"opt_out": True},
                                   If_Match='"7", "1"')
    assert (status, tag, body["opt_out"]) == (200, '"2"', True)


@pytest.mark.parametrize("patch", [{"categories": [None]}, {"opt_out": 1},
                                   {"categories": {"alert": {"sms": "off"}}}, {"topics": {}},
                                   {"": None}, {"categories": {"alert": {"fax": None}}}])
async def test_a_malformed_patch_is_a_422_whatever_if_match_says(api: Api,
                                                               patch: dict[str, Any]) -> None:
    status, body, _ = await call(api, "PATCH", PREFS, patch, If_Match='"7"')
    assert status == 422 and body["error"]["code"] in ("invalid_field", "unknown_field")


@pytest.mark.parametrize(("header", "status"), [
    ("*", 200), ('W/"0"', 412), ("0", 412), ('"0"', 200), ('"00"', 412), ('"x"', 412),
    ('"-0"', 412)])
async def test_if_match_compares_strongly(api: Api, header: str, status: int) -> None:
    assert (await call(api, "PATCH", PREFS, {"opt_out": True}, If_Match=header))[0] == status
