"""The OpenAPI document describes events and topics as they answer: real responses of the real
app over the real store, checked against the document's schemas."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from support import Api, make_config
from test_openapi import check, declared

from notifyd.config import EventTypeConfig, validate
from notifyd.core.clock import FakeClock
from notifyd.core.models import ALL_SCOPES
from notifyd.engine.fanout import Fanout
from notifyd.engine.ingest import Ingest
from notifyd.http.app import make_app
from notifyd.http.auth import KeyCache
from notifyd.http.kit import Context
from notifyd.store.core.store import CoreStore


@pytest.fixture
async def events_api(db_path: Path, store: CoreStore,
                     clock: FakeClock) -> AsyncIterator[tuple[Api, Fanout]]:
    cfg = validate(dataclasses.replace(make_config(db_path), events={
        "outage": EventTypeConfig(kinds=("fixed",))}))
    ingest = Ingest(cfg, store, clock)
    ctx = Context(cfg, ingest, KeyCache(store, clock), clock)
    async with TestClient(TestServer(make_app(ctx))) as client:
        a = Api(client, store, clock, db_path)
        a.key = await a.new_key(scopes=ALL_SCOPES)
        yield a, Fanout(cfg, store, ingest, clock)


async def test_event_and_topic_responses_match_their_schemas(
        events_api: tuple[Api, Fanout]) -> None:
    api, fanout = events_api

    async def call(method: str, path: str, template: str, schema: str | None,
                   body: Any = None) -> Any:
        status, answer = await api.call(method, path, body)
        assert str(status) in declared(method, template), (status, answer)
        if schema is not None:
            check(schema, answer)
        return answer

    check("TopicRequest", {"self_service": True})
    await call("PUT", "/v1/topics/ops", "/v1/topics/{topic}", "Topic", {"self_service": True})
    await call("GET", "/v1/topics/ops", "/v1/topics/{topic}", "Topic")
    check("MembersRequest", {"add": ["u1", "u2"]})
    await call("POST", "/v1/topics/ops/members", "/v1/topics/{topic}/members", "Topic",
               {"add": ["u1", "u2"]})
    await call("GET", "/v1/topics/ops/members?limit=1", "/v1/topics/{topic}/members", "Members")
    await call("PUT", "/v1/users/u3/topics/ops", "/v1/users/{user_id}/topics/{topic}",
               "Following")
    await call("GET", "/v1/users/u3/topics", "/v1/users/{user_id}/topics", "Followed")
    await call("DELETE", "/v1/users/u3/topics/ops", "/v1/users/{user_id}/topics/{topic}",
               "Following")
    for i, audience in enumerate([{"topic": "ops"}, {"user_ids": ["u1"]}, {"everyone": True}]):
        body = {"event_id": f"e{i}", "type": "outage", "audience": audience,
                "params": {"where": "eu"}, "subject": "incident:7"}
        check("EventRequest", body)
        await call("POST", "/v1/events", "/v1/events", "EventAccepted", body)
        await call("POST", "/v1/events", "/v1/events", "EventAccepted", body)  # again: 200
        await call("GET", f"/v1/events/e{i}", "/v1/events/{event_id}", "Event")
    await fanout.run_once()
    await call("GET", "/v1/events/e0", "/v1/events/{event_id}", "Event")
    for method, path, template, body in [
            ("POST", "/v1/events", "/v1/events", {"event_id": "e0", "type": "outage",
                                                  "audience": {"topic": "ops"}}),
            ("GET", "/v1/events/nope", "/v1/events/{event_id}", None),
            ("DELETE", "/v1/topics/ops", "/v1/topics/{topic}", None),
            ("GET", "/v1/topics/nope/members", "/v1/topics/{topic}/members", None)]:
        answer = await call(method, path, template, "Error", body)
        assert answer["error"]["code"] in ("event_conflict", "not_found", "topic_not_empty")
    await call("POST", "/v1/topics/ops/members", "/v1/topics/{topic}/members", "Topic",
               {"remove": ["u1", "u2"]})
    await call("DELETE", "/v1/topics/ops", "/v1/topics/{topic}", None)
