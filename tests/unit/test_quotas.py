"""Per-tenant quotas ([quotas], a tenant's own in [tenants.NAME]): past one, 429 quota_exceeded
with Retry-After and nothing accepted; another tenant's quota is its own; the fake clock
refills the bucket."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from support import Api, make_config

from notifyd.config import Config, EventTypeConfig, validate
from notifyd.config.policy import TenantConfig
from notifyd.config.process import QuotasConfig
from notifyd.core.clock import FakeClock
from notifyd.core.models import ALL_SCOPES
from notifyd.engine.ingest import Ingest
from notifyd.engine.quotas import DAY_SEC
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache
from notifyd.http.kit import Context
from notifyd.store.core.store import CoreStore


@pytest.fixture
async def api(cfg: Config, store: CoreStore, clock: FakeClock,
              db_path: Path) -> AsyncIterator[Api]:
    """Tenant acme: 2 accepts and 3 batch items a second ([quotas]); tenant roomy: its own
    10 accepts a second ([tenants.roomy])."""
    cfg = dataclasses.replace(
        cfg, quotas=QuotasConfig(accepts_per_sec=2, batch_items_per_sec=3),
        tenants={"roomy": TenantConfig(accepts_per_sec=10)})
    ctx = Context(cfg, Ingest(cfg, store, clock), KeyCache(store, clock), clock)
    async with TestClient(TestServer(make_app(ctx))) as client:
        a = Api(client, store, clock, db_path)
        a.key = await a.new_key()
        yield a


def one(i: int) -> dict[str, Any]:
    return {"user_id": f"u{i}", "kind": "alert", "params": {}}


async def refused(api: Api, path: str, body: Any, key: str | None = None) -> tuple[str, str]:
    headers = {"Authorization": f"Bearer {key or api.key}"}
    async with api.client.post(path, json=body, headers=headers) as resp:
        assert resp.status == 429
        return (await resp.json())["error"]["code"], resp.headers["Retry-After"]


async def test_accepts_past_the_tenants_quota_are_refused_until_it_refills(api: Api) -> None:
    assert (await api.post(one(1)))[0] == 202
    assert (await api.post(one(2)))[0] == 202
    assert await refused(api, "/v1/notifications", one(3)) == ("quota_exceeded", "1")
    api.clock.advance(0.5)  # half a second: one more
    assert (await api.post(one(3)))[0] == 202
    assert (await refused(api, "/v1/notifications", one(4)))[0] == "quota_exceeded"


async def test_a_tenant_of_its_own_quota_and_another_tenant_are_not_held(api: Api) -> None:
    roomy = await api.new_key("roomy")
    other = await api.new_key("other")
    for i in range(2):
        assert (await api.post(one(i)))[0] == 202
    assert (await refused(api, "/v1/notifications", one(9)))[0] == "quota_exceeded"
    for i in range(10):
        assert (await api.post(one(i), key=roomy))[0] == 202
    for i in range(2):  # [quotas]' own 2 a second, counted apart from acme's
        assert (await api.post(one(i), key=other))[0] == 202


async def test_batch_items_past_the_quota_refuse_the_batch_whole(api: Api) -> None:
    status, body = await api.call("POST", "/v1/notifications/batch",
                                  {"items": [one(i) for i in range(3)]})
    assert status == 200 and [r["status"] for r in body["results"]] == [202] * 3
    code, wait = await refused(api, "/v1/notifications/batch", {"items": [one(7)]})
    assert (code, wait) == ("quota_exceeded", "1")
    api.clock.advance(1)
    status, body = await api.call("POST", "/v1/notifications/batch",
                                  {"items": [one(i) for i in range(4)]})  # more than a second's:
    assert status == 200  # goes when the bucket is full, and owes the difference
    code, wait = await refused(api, "/v1/notifications/batch", {"items": [one(8)]})
    assert (code, wait) == ("quota_exceeded", "1")
    api.clock.advance(0.6)  # paid back 1.8 of the 2 it needs (owing 1, wanting 1)
    assert (await refused(api, "/v1/notifications/batch", {"items": [one(8)]}))[0] == \
        "quota_exceeded"
    api.clock.advance(0.1)
    status, _ = await api.call("POST", "/v1/notifications/batch", {"items": [one(8)]})
    assert status == 200


@pytest.fixture
async def events_api(db_path: Path, store: CoreStore, clock: FakeClock) -> AsyncIterator[Api]:
    """Events of type outage; acme's events may reach 3 recipients a day."""
    cfg = validate(dataclasses.replace(
        make_config(db_path), events={"outage": EventTypeConfig(kinds=("fixed",))},
        quotas=QuotasConfig(event_recipients_per_day=3)))
    ctx = Context(cfg, Ingest(cfg, store, clock), KeyCache(store, clock), clock)
    async with TestClient(TestServer(make_app(ctx))) as client:
        a = Api(client, store, clock, db_path)
        a.key = await a.new_key(scopes=ALL_SCOPES)
        yield a


def event(n: int, audience: dict[str, Any]) -> dict[str, Any]:
    return {"event_id": f"e{n}", "type": "outage", "audience": audience, "params": {}}


async def test_an_event_past_the_days_recipients_is_refused_and_nothing_written(
        events_api: Api) -> None:
    api = events_api
    assert (await api.call("PUT", "/v1/topics/big", {}))[0] in (200, 201)
    status, _ = await api.call("POST", "/v1/topics/big/members",
                               {"add": [f"u{i}" for i in range(4)]})
    assert status == 200
    code, wait = await refused(api, "/v1/events", event(1, {"topic": "big"}))
    assert (code, wait) == ("quota_exceeded", str(DAY_SEC))  # more than a whole day's
    assert (await api.get("/v1/events/e1"))[0] == 404  # nothing of it written
    assert (await api.call("POST", "/v1/events", event(2, {"user_ids": ["u1", "u2"]})))[0] == 202
    # two of the day's three taken: a list of two is refused until a third of a day passes
    assert (await refused(api, "/v1/events", event(3, {"user_ids": ["u1", "u2"]})))[0] == \
        "quota_exceeded"
    api.clock.advance(DAY_SEC / 3 + 1)
    assert (await api.call("POST", "/v1/events", event(3, {"user_ids": ["u1", "u2"]})))[0] == 202
