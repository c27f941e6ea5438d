"""send_at on POST /v1/notifications: the ladder, quiet hours and the time to live count from
it; a past one is now; one too far ahead, malformed, or for a kind with an inbox is a 422; it is
compared for dedup conflicts; status and inspect show it."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson
import pytest
from support import START_MS, Api, make_config

from notifyd.config import KindConfig, LadderStep
from notifyd.core.clock import FakeClock
from notifyd.core.errors import DomainError
from notifyd.core.models import ApiKey, Recipient
from notifyd.core.text import iso
from notifyd.domain.views import timeline
from notifyd.engine.ingest import Ingest
from notifyd.store.core.store import CoreStore

BODY = {"user_id": "u1", "kind": "alert", "params": {"invoice": 1009}}
HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
TTL_MS = 86_400_000  # the alert kind's ttl_sec


async def post_at(api: Api, send_at: Any, key: str | None = None,
                  **more: Any) -> tuple[int, Any]:
    return await api.post({**BODY, "send_at": send_at, **more}, key=key)


async def test_every_step_and_the_time_to_live_count_from_send_at(api: Api) -> None:
    send_at = START_MS + 2 * HOUR_MS
    status, body = await post_at(api, iso(send_at))
    assert (status, body["state"]) == (202, "log_pending")
    n = await api.record(body["notification_id"])
    assert [s.send_after for s in n.steps] == [send_at, send_at + 30_000, send_at + 90_000]
    assert (n.created_at, n.send_at, n.expires_at) == (START_MS, send_at, send_at + TTL_MS)
    status, doc = await api.get(f"/v1/notifications/{n.id}")
    assert (doc["created_at"], doc["send_at"], doc["expires_at"]) == (
        iso(START_MS), iso(send_at), iso(send_at + TTL_MS))
    assert doc["steps"][0]["send_after"] == iso(send_at)


async def test_any_offset_names_the_same_instant(api: Api) -> None:
    _, body = await post_at(api, "2026-09-21T18:13:20.250+02:00")  # 16:13:20.250Z
    n = await api.record(body["notification_id"])
    assert n.send_at == START_MS + 2 * HOUR_MS + 250


@pytest.mark.parametrize("past", [START_MS - 1, START_MS - 365 * DAY_MS, 0])
async def test_a_send_at_already_past_is_now(api: Api, past: int) -> None:
    status, body = await post_at(api, iso(past))
    assert status == 202
    n = await api.record(body["notification_id"])
    assert [s.send_after for s in n.steps] == [START_MS, START_MS + 30_000, START_MS + 90_000]
    assert (n.send_at, n.expires_at) == (START_MS, START_MS + TTL_MS)


async def test_without_send_at_nothing_is_scheduled(api: Api) -> None:
    _, body = await api.post(BODY)
    _, doc = await api.get(f"/v1/notifications/{body['notification_id']}")
    assert doc["send_at"] is None
    assert "scheduled" not in "\n".join(timeline(await api.record(body["notification_id"])))


async def test_quiet_hours_are_judged_at_send_at(api: Api) -> None:
    """START_MS is 14:13 UTC, outside 22:00-07:00; a send_at of 23:00 is inside it."""
    await api.call("PUT", "/v1/users/u1", {"timezone": "UTC",
                                           "quiet_hours": {"start": "22:00", "end": "07:00"}})
    _, now = await api.post(BODY)
    assert (await api.record(now["notification_id"])).steps[0].send_after == START_MS
    eleven = START_MS - START_MS % DAY_MS + 23 * HOUR_MS
    seven = eleven + 8 * HOUR_MS
    _, later = await post_at(api, iso(eleven))
    n = await api.record(later["notification_id"])
    assert [s.send_after for s in n.steps] == [seven, seven + 30_000, seven + 90_000]
    assert n.steps[0].note == "quiet hours 22:00-07:00 UTC: moved from 2026-09-21 23:00"


async def test_inspect_shows_the_schedule(api: Api) -> None:
    send_at = START_MS + HOUR_MS
    _, body = await post_at(api, iso(send_at))
    lines = timeline(await api.record(body["notification_id"]), START_MS)
    assert f"scheduled: the ladder starts {iso(send_at)}" in lines[1]
    assert lines[2].endswith(f"step 0 log: planned for {iso(send_at)} (at send_at)")
    assert f"planned for {iso(send_at + 30_000)} (when step 0's 30 s window ends)" in lines[3]


async def test_after_sec_counts_from_send_at_in_the_timeline(
        api: Api, cfg: Any, store: CoreStore, clock: FakeClock) -> None:
    kinds = {"later": KindConfig(ladder=(LadderStep("log", after_sec=600),))}
    ingest = Ingest(make_config(cfg.store.url, kinds=kinds), store, clock)
    inp = ingest.parse(orjson.dumps({"user_id": "u1", "kind": "later",
                                     "send_at": iso(START_MS + HOUR_MS)}), KEY, None)
    result = await ingest.accept(inp)
    n = await api.record(result.notification_id)
    assert n.steps[0].send_after == START_MS + HOUR_MS + 600_000
    assert "(600 s after send_at)" in "\n".join(timeline(n))


MAX_AHEAD_MS = 31 * DAY_MS


async def test_send_at_at_most_max_schedule_sec_ahead(api: Api) -> None:
    status, _ = await post_at(api, iso(START_MS + MAX_AHEAD_MS))
    assert status == 202
    status, answer = await post_at(api, iso(START_MS + MAX_AHEAD_MS + 1))
    assert (status, answer["error"]["code"], answer["error"]["field"]) == (
        422, "invalid_field", "send_at")
    assert "server.max_schedule_sec" in answer["error"]["message"]
    assert api.count("notifications") == 1


@pytest.mark.parametrize("value", [
    "tomorrow", 1790000000, True, {"at": 1}, "2026-09-21T14:13:20",  # no offset
    "2026-09-21 14:13:20Z", "2026-09-21", "2026-02-30T00:00:00Z", "2026-09-21T24:00:00Z",
    "2026-09-21T14:13:60Z", "20260921T141320Z", "2026-09-21T14:13:20+0200", ""])
async def test_a_send_at_that_is_not_an_rfc_3339_time_is_refused(api: Api, value: Any) -> None:
    status, answer = await post_at(api, value)
    assert (status, answer["error"]["code"], answer["error"]["field"]) == (
        422, "invalid_field", "send_at")
    assert "RFC 3339" in answer["error"]["message"]
    assert api.count("notifications") == 0


async def test_a_null_send_at_is_absent(api: Api) -> None:
    status, body = await post_at(api, None)
    assert status == 202
    assert (await api.record(body["notification_id"])).send_at is None


KEY = ApiKey("test", "acme", (), "hash")


def test_a_kind_with_an_inbox_refuses_send_at(cfg: Any, store: CoreStore) -> None:
    kinds = {"news": KindConfig(ladder=(LadderStep("log"),), inbox=True)}
    ingest = Ingest(make_config(cfg.store.url, kinds=kinds), store, FakeClock(START_MS))
    body = orjson.dumps({"user_id": "u1", "kind": "news", "send_at": iso(START_MS + HOUR_MS)})
    with pytest.raises(DomainError) as refused:
        ingest.parse(body, KEY, None)
    assert (refused.value.code, refused.value.field) == ("invalid_field", "send_at")
    assert "inbox" in refused.value.message
    ingest.parse(orjson.dumps({"user_id": "u1", "kind": "news"}), KEY, None)  # fine without


async def test_send_at_is_compared_when_a_dedup_key_is_used_again(api: Api) -> None:
    send_at = iso(START_MS + HOUR_MS)
    _, first = await post_at(api, send_at, dedup_key="inv-1")
    status, again = await post_at(api, send_at, dedup_key="inv-1")
    assert (status, again["notification_id"]) == (200, first["notification_id"])
    status, other = await post_at(api, iso(START_MS + 2 * HOUR_MS), dedup_key="inv-1")
    assert (status, other["error"]["code"], other["error"]["field"]) == (
        409, "dedup_conflict", "dedup_key")
    status, bare = await api.post({**BODY, "dedup_key": "inv-1"})
    assert (status, bare["error"]["code"]) == (409, "dedup_conflict")
    _, unscheduled = await api.post({**BODY, "dedup_key": "inv-2"})
    status, scheduled = await post_at(api, send_at, dedup_key="inv-2")
    assert (status, scheduled["error"]["code"]) == (409, "dedup_conflict")
    assert api.count("notifications") == 2


def test_a_request_without_send_at_hashes_as_it_always_did(cfg: Any, store: CoreStore) -> None:
    """Retries of notifications accepted before send_at existed must still match their hash."""
    ingest = Ingest(cfg, store, FakeClock(START_MS))
    inp = ingest.parse(orjson.dumps({**BODY, "dedup_key": "d"}), KEY, None)
    before = orjson.dumps(["u1", "alert", {"invoice": 1009}, None, None],
                          option=orjson.OPT_SORT_KEYS)
    assert inp.request_hash == hashlib.sha256(before).hexdigest()


async def test_a_key_for_other_kinds_gets_kind_not_allowed_before_send_at_checks(
        api: Api) -> None:
    key = await api.new_key(kinds=("fixed",))
    status, answer = await post_at(api, "not a time", key=key)
    assert (status, answer["error"]["code"]) == (403, "kind_not_allowed")


async def test_a_scheduled_notification_resolved_first_ends_resolved(api: Api) -> None:
    _, body = await post_at(api, iso(START_MS + HOUR_MS), dedup_key="inv-9")
    status, r = await api.call("POST", "/v1/resolutions",
                               {"user_id": "u1", "dedup_key": "inv-9", "resolution": "paid"})
    assert (status, r["cancelled_steps"]) == (200, 3)
    _, doc = await api.get(f"/v1/notifications/{body['notification_id']}")
    assert doc["current_state"] == "resolved"
    assert {s["status"] for s in doc["steps"]} == {"cancelled"}


async def test_a_saved_profile_is_read_when_accepted_not_at_send_at(api: Api) -> None:
    """The plan is made at accept, on the profile then: quiet hours set after it move nothing
    already planned (the claim checks quiet hours again when the step is due)."""
    _, body = await post_at(api, iso(START_MS + 9 * HOUR_MS))  # 23:13 UTC
    await api.store.put_recipient(Recipient("acme", "u1", "UTC", None, "22:00", "07:00"))
    n = await api.record(body["notification_id"])
    assert n.steps[0].send_after == START_MS + 9 * HOUR_MS
