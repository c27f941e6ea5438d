"""PUT/GET /v1/users/{id}: contacts, timezone, locale and quiet hours, validated field by field."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from support import Api, make_config

from notifyd.channels.webpush import WebPushSettings, generate_vapid_keys
from notifyd.config import ChannelConfig
from notifyd.core.clock import FakeClock
from notifyd.engine.ingest import Ingest
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache
from notifyd.http.kit import Context
from notifyd.store.core.store import CoreStore

USER = {"email": "ada@example.com", "phone": "+15550100", "telegram_chat_id": "4242",
        "slack_user_id": "U123", "timezone": "Europe/Paris", "locale": "fr-FR",
        "quiet_hours": {"start": "22:00", "end": "07:30"}}


async def test_put_then_get_round_trips(api: Api) -> None:
    status, put = await api.call("PUT", "/v1/users/u1", USER)
    assert status == 200
    assert put == {"user_id": "u1", **USER, "disabled_contacts": {}, "devices": []}
    status, got = await api.get("/v1/users/u1")
    assert (status, got) == (200, put)


async def test_put_replaces_the_whole_profile(api: Api) -> None:
    await api.call("PUT", "/v1/users/u1", USER)
    status, body = await api.call("PUT", "/v1/users/u1", {"email": "new@example.com"})
    assert status == 200
    assert body == {"user_id": "u1", "email": "new@example.com", "timezone": None,
                    "locale": None, "quiet_hours": None, "disabled_contacts": {},
                    "devices": []}


async def test_users_are_per_tenant(api: Api) -> None:
    await api.call("PUT", "/v1/users/u1", USER)
    other = await api.new_key(tenant="globex")
    status, body = await api.get("/v1/users/u1", key=other)
    assert (status, body["error"]["code"]) == (404, "not_found")


async def test_an_unknown_user_is_not_found(api: Api) -> None:
    status, body = await api.get("/v1/users/nobody")
    assert (status, body["error"]["code"], body["error"]["field"]) == (404, "not_found",
                                                                       "user_id")


@pytest.mark.parametrize(("patch", "field"), [
    ({"timezone": "Mars/Olympus"}, "timezone"),
    ({"timezone": 3}, "timezone"),
    ({"quiet_hours": {"start": "25:00", "end": "07:00"}}, "quiet_hours"),
    ({"quiet_hours": {"start": "10pm", "end": "07:00"}}, "quiet_hours"),
    ({"quiet_hours": {"start": 22, "end": 7}}, "quiet_hours"),
    ({"quiet_hours": {"start": "22:00"}}, "quiet_hours"),
    ({"quiet_hours": "22:00-07:00"}, "quiet_hours"),
    ({"slack_user_id": ""}, "slack_user_id"),
    ({"email": ""}, "email"),
    ({"email": "not an address"}, "email"),
    ({"phone": "555-0100"}, "phone"),
    ({"phone": "+0123456789"}, "phone"),
])
async def test_invalid_fields_are_named(api: Api, patch: dict[str, Any], field: str) -> None:
    status, body = await api.call("PUT", "/v1/users/u1", {**USER, **patch})
    assert (status, body["error"]["code"], body["error"]["field"]) == (422, "invalid_field",
                                                                       field)
    assert api.count("recipients") == 0


async def test_unknown_user_fields_are_refused(api: Api) -> None:
    status, body = await api.call("PUT", "/v1/users/u1", {**USER, "pager": "123"})
    assert (status, body["error"]["code"], body["error"]["field"]) == (422, "unknown_field",
                                                                       "pager")


async def test_a_disabled_address_counts_while_it_is_the_users_address(api: Api) -> None:
    await api.store.backend.write(lambda tx: tx.run(
        "INSERT INTO suppressions VALUES ('acme', 'email', 'a@x.io', 'bounced', 'ses', NULL, 1)"))
    status, body = await api.call("PUT", "/v1/users/u1", {"email": "a@x.io"})
    assert status == 200
    assert body["disabled_contacts"] == {"email": "bounced"}  # the same address: still dead
    status, body = await api.call("PUT", "/v1/users/u1", {"email": "b@x.io"})
    assert body["disabled_contacts"] == {}  # a new address starts alive


async def test_contact_state_is_visible_for_a_user_without_a_profile(api: Api) -> None:
    await api.call("POST", "/v1/users/u9/devices", {"type": "fcm", "token": "t-1"})
    status, body = await api.get("/v1/users/u9")  # devices only, no profile: still a user
    assert status == 200 and body["user_id"] == "u9" and len(body["devices"]) == 1
    assert await api.get("/v1/users/nobody") == (404, {"error": {
        "code": "not_found", "message": "no user 'nobody'", "field": "user_id"}})


@pytest.mark.parametrize("zone", ["America", "Etc", "../../etc/passwd", "Europe/"])
async def test_a_timezone_naming_a_folder_or_a_path_is_refused(api: Api, zone: str) -> None:
    status, body = await api.call("PUT", "/v1/users/u1", {"timezone": zone})
    assert (status, body["error"]["code"], body["error"]["field"]) == (
        422, "invalid_field", "timezone")


async def test_a_path_user_id_has_the_bodys_limits(api: Api) -> None:
    status, body = await api.call("PUT", "/v1/users/" + "u" * 8000, {"timezone": "UTC"})
    assert (status, body["error"]["code"], body["error"]["field"]) == (
        422, "invalid_field", "user_id")


SUBSCRIPTION = {"endpoint": "https://updates.push.services.mozilla.com/wpush/v2/gAAAA",
                "expirationTime": None,
                "keys": {"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-"
                                   "Ts1XbjhazAkj7I99e8QcYP7DkM", "auth": "tBHItJI5svbpez7KI4CCXg"}}


async def test_devices_are_registered_listed_and_removed(api: Api) -> None:
    status, dev = await api.call("POST", "/v1/users/u1/devices", SUBSCRIPTION)
    assert status == 201 and dev["type"] == "webpush" and dev["state"] == "live"
    assert dev["host"] == "updates.push.services.mozilla.com" and "keys" not in dev
    again = await api.call("POST", "/v1/users/u1/devices", SUBSCRIPTION)
    assert again == (201, dev)  # the same subscription is the same device
    status, fcm = await api.call("POST", "/v1/users/u1/devices", {"type": "fcm",
                                                                  "token": "fcm-token-1"})
    assert status == 201 and fcm["type"] == "fcm" and fcm["device_id"] != dev["device_id"]
    status, listed = await api.get("/v1/users/u1/devices")
    assert {d["device_id"] for d in listed["devices"]} == {dev["device_id"], fcm["device_id"]}
    status, user = await api.get("/v1/users/u1")  # a user with devices only is a user
    assert status == 200 and len(user["devices"]) == 2
    assert (await api.call("DELETE", f"/v1/users/u1/devices/{dev['device_id']}"))[0] == 204
    status, body = await api.call("DELETE", f"/v1/users/u1/devices/{dev['device_id']}")
    assert (status, body["error"]["code"]) == (404, "not_found")


async def test_a_push_device_no_channel_would_send_to_is_refused(
        db_path: Path, store: CoreStore, clock: FakeClock) -> None:
    """A subscription on a host outside every web push channel's allowed_hosts would be skipped
    at each send, silently: it is refused when registered, naming the rule."""
    private, _ = generate_vapid_keys()
    base = make_config(db_path)
    push = ChannelConfig(type="webpush", settings=WebPushSettings(
        vapid_private_key=private, vapid_subject="mailto:ops@example.com",
        allowed_hosts=("*.push.services.mozilla.com",)))
    cfg = dataclasses.replace(base, channels={**base.channels, "push": push})
    ctx = Context(cfg, Ingest(cfg, store, clock), KeyCache(store, clock), clock)
    async with TestClient(TestServer(make_app(ctx))) as client:
        api = Api(client, store, clock, db_path)
        api.key = await api.new_key()
        status, dev = await api.call("POST", "/v1/users/u1/devices", SUBSCRIPTION)
        assert status == 201 and dev["state"] == "live"
        elsewhere = {**SUBSCRIPTION, "endpoint": "https://push.evil.example/wp/1"}
        status, answer = await api.call("POST", "/v1/users/u1/devices", elsewhere)
        assert (status, answer["error"]["field"]) == (422, "endpoint")
        assert answer["error"]["message"] == (
            "channels.push: push service host push.evil.example is not in allowed_hosts; "
            "this device would never be sent to")
        _, listed = await api.get("/v1/users/u1/devices")
        assert [d["device_id"] for d in listed["devices"]] == [dev["device_id"]]


@pytest.mark.parametrize(("body", "field"), [
    ({"endpoint": "ftp://x/y", "keys": SUBSCRIPTION["keys"]}, "endpoint"),
    ({"endpoint": SUBSCRIPTION["endpoint"]}, "keys"),
    ({"endpoint": SUBSCRIPTION["endpoint"], "keys": {"p256dh": "no spaces!", "auth": "x"}},
     "keys"),
    ({"type": "mipush", "token": "x"}, "type"),
    ({"type": "fcm"}, "token"),
    ({"type": "apns", "token": "x"}, "token"),
    ({"type": "apns", "token": "ab" * 31 + "zz"}, "token"),
])
async def test_a_bad_device_is_refused_naming_the_field(api: Api, body: dict[str, Any],
                                                        field: str) -> None:
    status, answer = await api.call("POST", "/v1/users/u1/devices", body)
    assert status == 422 and answer["error"]["field"] == field
