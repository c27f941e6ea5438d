"""Resolution from outside: by id or dedup key, idempotent, first one wins; the status view."""

from __future__ import annotations

from support import ALERT_STEPS, START_MS, Api

from notifyd.core.text import iso

BODY = {"user_id": "u1", "kind": "alert", "dedup_key": "inv-1"}


async def accepted(api: Api) -> str:
    status, body = await api.post(BODY)
    assert status == 202
    return str(body["notification_id"])


async def test_resolve_cancels_pending_steps(api: Api) -> None:
    nid = await accepted(api)
    api.clock.advance(5)
    status, body = await api.call("POST", f"/v1/notifications/{nid}/resolve",
                                  {"resolution": "paid"})
    assert status == 200
    assert body == {"notification_id": nid, "resolution": "paid", "changed": True,
                    "resolved_at": iso(START_MS + 5000), "cancelled_steps": ALERT_STEPS}
    steps = (await api.record(nid)).steps
    assert [(s.state, s.reason, s.updated_at) for s in steps] == [
        ("cancelled", "resolved: paid", START_MS + 5000)] * ALERT_STEPS


async def test_the_first_resolution_wins(api: Api) -> None:
    nid = await accepted(api)
    await api.call("POST", f"/v1/notifications/{nid}/resolve", {"resolution": "paid"})
    api.clock.advance(60)
    status, body = await api.call("POST", f"/v1/notifications/{nid}/resolve",
                                  {"resolution": "cancelled_by_user"})
    assert status == 200
    assert (body["changed"], body["resolution"], body["cancelled_steps"]) == (False, "paid", 0)
    assert body["resolved_at"] == iso(START_MS)
    assert (await api.record(nid)).resolution == "paid"


async def test_resolve_without_a_body_uses_the_default_resolution(api: Api) -> None:
    nid = await accepted(api)
    status, body = await api.call("POST", f"/v1/notifications/{nid}/resolve")
    assert (status, body["resolution"], body["changed"]) == (200, "resolved", True)


async def test_resolve_by_user_and_dedup_key(api: Api) -> None:
    nid = await accepted(api)
    status, body = await api.call("POST", "/v1/resolutions", {
        "user_id": "u1", "dedup_key": "inv-1", "resolution": "confirmed"})
    assert (status, body["notification_id"], body["changed"]) == (200, nid, True)
    status, again = await api.call("POST", "/v1/resolutions", {
        "user_id": "u1", "dedup_key": "inv-1", "resolution": "other"})
    assert (status, again["changed"], again["resolution"]) == (200, False, "confirmed")


async def test_resolving_the_unknown_is_not_found(api: Api) -> None:
    status, body = await api.call("POST", "/v1/notifications/n_nothing/resolve", {})
    assert (status, body["error"]["code"]) == (404, "not_found")
    status, body = await api.call("POST", "/v1/resolutions",
                                  {"user_id": "u1", "dedup_key": "never"})
    assert (status, body["error"]["code"], body["error"]["field"]) == (404, "not_found",
                                                                       "dedup_key")
    status, body = await api.get("/v1/notifications/n_nothing")
    assert (status, body["error"]["code"]) == (404, "not_found")


async def test_resolution_requests_are_validated(api: Api) -> None:
    nid = await accepted(api)
    status, body = await api.call("POST", f"/v1/notifications/{nid}/resolve", {"why": "x"})
    assert (status, body["error"]["code"], body["error"]["field"]) == (422, "unknown_field",
                                                                       "why")
    status, body = await api.call("POST", "/v1/resolutions", {"user_id": "u1"})
    assert (status, body["error"]["code"], body["error"]["field"]) == (422, "missing_field",
                                                                       "dedup_key")
    assert (await api.record(nid)).resolved_at is None


async def test_status_of_an_open_notification(api: Api) -> None:
    nid = await accepted(api)
    status, body = await api.get(f"/v1/notifications/{nid}")
    assert status == 200
    assert body["current_state"] == "log_pending"
    assert body["resolution"] is None and body["delivered_via"] is None
    assert body["total_time_ms"] is None
    assert [(s["channel"], s["status"], s["send_after"]) for s in body["steps"]] == [
        ("log", "pending", iso(START_MS)), ("sms", "pending", iso(START_MS + 30_000)),
        ("email", "pending", iso(START_MS + 90_000))]


async def test_status_of_a_resolved_notification(api: Api) -> None:
    nid = await accepted(api)
    api.clock.advance(12.5)
    await api.call("POST", f"/v1/notifications/{nid}/resolve", {"resolution": "paid"})
    status, body = await api.get(f"/v1/notifications/{nid}")
    assert status == 200
    assert body["notification_id"] == nid
    assert body["current_state"] == "resolved"
    assert body["resolution"] == {"resolution": "paid", "resolved_at": iso(START_MS + 12_500),
                                  "resolved_by": "key:k1"}
    assert body["total_time_ms"] == 12_500
    for step in body["steps"]:
        assert step["status"] == "cancelled"
        assert step["reason"] == "resolved: paid"
        assert step["attempts"] == 0 and step["attempt_log"] == []
        assert step["send_after"] is not None
