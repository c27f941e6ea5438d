"""The OpenAPI document stays true: routes, error codes and real responses match it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from support import Api

from notifyd.http import people, unsubscribe
from notifyd.http.app import ROUTES
from notifyd.http.errors import CATALOG
from notifyd.http.openapi import spec

ROOT = Path(__file__).resolve().parents[2]
BODY = {"user_id": "u1", "kind": "alert", "dedup_key": "d1", "params": {"n": 1}}


def check(schema_name: str, instance: Any) -> None:
    """Validate against a component schema, $refs resolved within the whole document."""
    doc = spec()
    schema = {"components": doc["components"], "$ref": f"#/components/schemas/{schema_name}"}
    Draft202012Validator.check_schema(schema)
    Draft202012Validator(schema).validate(instance)


def declared(method: str, path: str) -> set[str]:
    return set(spec()["paths"][path][method.lower()]["responses"])


def documented(path: str) -> str:
    """A route's path as the document names it: /v1/notifications/{id:regex} is .../{id}."""
    return re.sub(r"\{(\w+):[^}]*\}", r"{\1}", path)


def test_every_route_is_described_and_nothing_else() -> None:
    routes = {(documented(path), method.lower()) for method, path, _ in [
        *ROUTES, *people.ROUTES, *unsubscribe.ROUTES]}
    described = {(path, method) for path, ops in spec()["paths"].items() for method in ops}
    assert routes == described


def test_the_error_schema_lists_every_catalog_code() -> None:
    enum = spec()["components"]["schemas"]["Error"]["properties"]["error"]["properties"][
        "code"]["enum"]
    assert set(enum) == set(CATALOG)


def test_every_code_the_rules_or_the_face_raise_is_in_the_catalog() -> None:
    """The rules raise DomainError with a code and know no status; the face answers it with
    the catalog's, so a code missing there would be a 500 at the edge."""
    source = "\n".join(p.read_text() for p in (ROOT / "notifyd").rglob("*.py"))
    raised = set(re.findall(r"(?:DomainError|ApiError)\(\s*\"([a-z_]+)\"", source))
    assert len(raised) > 15 and raised - set(CATALOG) == set()


def test_the_document_is_valid_json_schema() -> None:
    for name in spec()["components"]["schemas"]:
        Draft202012Validator.check_schema(
            {"components": spec()["components"], "$ref": f"#/components/schemas/{name}"})


async def test_served_document_is_the_spec_with_the_configured_names(api: Api) -> None:
    status, doc = await api.get("/v1/openapi.json", key="")
    assert (status, doc) == (200, spec(["alert", "fixed", "page"], ["email", "log", "sms"]))
    assert doc["components"]["schemas"]["AcceptRequest"]["properties"]["kind"]["enum"] == [
        "alert", "fixed", "page"]


async def test_real_responses_match_their_schemas(api: Api) -> None:
    check("AcceptRequest", BODY)
    status, accepted = await api.post(BODY)
    assert str(status) in declared("POST", "/v1/notifications")
    check("Accepted", accepted)
    nid = accepted["notification_id"]

    status, again = await api.post(BODY)
    assert str(status) in declared("POST", "/v1/notifications")
    check("Accepted", again)

    status, doc = await api.get(f"/v1/notifications/{nid}")
    assert str(status) in declared("GET", "/v1/notifications/{id}")
    check("Status", doc)

    check("ResolveRequest", {"resolution": "paid"})
    status, resolved = await api.call("POST", f"/v1/notifications/{nid}/resolve",
                                      {"resolution": "paid"})
    assert str(status) in declared("POST", "/v1/notifications/{id}/resolve")
    check("Resolved", resolved)
    _, doc = await api.get(f"/v1/notifications/{nid}")
    check("Status", doc)  # now with a resolution object and cancelled steps

    request = {"user_id": "u1", "dedup_key": "d1", "resolution": "again"}
    check("ResolutionRequest", request)
    status, resolved = await api.call("POST", "/v1/resolutions", request)
    assert str(status) in declared("POST", "/v1/resolutions")
    check("Resolved", resolved)


async def test_scheduled_and_batch_answers_match_their_schemas(api: Api) -> None:
    scheduled = {**BODY, "dedup_key": "later", "send_at": "2026-09-21T15:00:00Z"}
    check("AcceptRequest", scheduled)
    _, accepted = await api.post(scheduled)
    _, doc = await api.get(f"/v1/notifications/{accepted['notification_id']}")
    check("Status", doc)
    assert doc["send_at"] == "2026-09-21T15:00:00.000+00:00"

    items = [BODY, {**BODY, "dedup_key": "d2"}, {**BODY, "kind": "nope"}, 7]
    check("AcceptBatch", {"items": items})
    status, answer = await api.call("POST", "/v1/notifications/batch", {"items": items})
    assert str(status) in declared("POST", "/v1/notifications/batch")
    check("AcceptResults", answer)
    assert [r["status"] for r in answer["results"]] == [202, 202, 422, 400]

    keys = [{"user_id": "u1", "dedup_key": "d2"}, {"user_id": "u1", "dedup_key": "gone"}]
    check("ResolutionBatch", {"items": keys})
    status, answer = await api.call("POST", "/v1/resolutions/batch", {"items": keys})
    assert str(status) in declared("POST", "/v1/resolutions/batch")
    check("ResolutionResults", answer)
    assert [r["status"] for r in answer["results"]] == [200, 404]


async def test_user_view_matches_its_schema(api: Api) -> None:
    user = {"email": "a@example.com", "slack_user_id": "U1", "timezone": "UTC",
            "quiet_hours": {"start": "22:00", "end": "07:00"}}
    check("User", user)
    status, view = await api.call("PUT", "/v1/users/u1", user)
    assert str(status) in declared("PUT", "/v1/users/{user_id}")
    check("UserView", view)
    status, view = await api.get("/v1/users/u1")
    assert str(status) in declared("GET", "/v1/users/{user_id}")
    check("UserView", view)
    patch = {"quiet_hours": {"end": "06:00"}, "slack_user_id": None}
    check("UserPatch", patch)
    status, view = await api.call("PATCH", "/v1/users/u1", patch)
    assert str(status) in declared("PATCH", "/v1/users/{user_id}")
    check("UserView", view)
    status, erased = await api.call("DELETE", "/v1/users/u1")
    assert str(status) in declared("DELETE", "/v1/users/{user_id}")
    check("Erased", erased)


async def test_preferences_answers_match_their_schemas(api: Api) -> None:
    path = "/v1/users/u1/preferences"
    patch = {"opt_out": None, "categories": {"alert": {"sms": False, "email": None}}}
    check("PreferencesPatch", patch)
    for method, body, match, want in (("PATCH", patch, None, 200), ("PUT", {}, '"0"', 412),
                                      ("PATCH", {}, '"1"', 200)):
        headers = {"If-Match": match} if match else {}
        status, answer = await api.call(method, path, body, headers=headers)
        assert status == want
        assert str(status) in declared(method, "/v1/users/{user_id}/preferences")
        check("Preferences" if status == 200 else "Error", answer)


ERROR_CALLS: list[tuple[str, str, Any]] = [
    ("POST", "/v1/notifications", {"user_id": "u1"}),
    ("POST", "/v1/notifications", {**BODY, "kind": "nope"}),
    ("POST", "/v1/notifications", b"{"),
    ("GET", "/v1/notifications/n_missing", None),
    ("POST", "/v1/notifications/n_missing/resolve", {}),
    ("POST", "/v1/resolutions", {"user_id": "u1"}),
    ("POST", "/v1/notifications/batch", {"items": []}),
    ("POST", "/v1/notifications/batch", b"[]"),
    ("POST", "/v1/resolutions/batch", {}),
    ("PUT", "/v1/users/{user_id}", {"timezone": "Nowhere/Special"}),
    ("GET", "/v1/users/{user_id}", None),
    ("PATCH", "/v1/users/{user_id}", {"quiet_hours": {"start": "22:00"}}),
    ("PATCH", "/v1/users/{user_id}", b"[]"),
    ("PATCH", "/v1/users/{user_id}/preferences", {"categories": {"nope": {}}}),
]


@pytest.mark.parametrize(("method", "path", "body"), ERROR_CALLS,
                         ids=[f"{m} {p}" for m, p, _ in ERROR_CALLS])
async def test_errors_match_the_schema_and_are_declared(api: Api, method: str, path: str,
                                                        body: Any) -> None:
    template = path.replace("n_missing", "{id}")
    concrete = path.replace("{user_id}", "nobody")
    raw = body if isinstance(body, bytes) else None
    status, answer = await api.call(method, concrete, None if raw else body, raw=raw)
    assert status >= 400
    check("Error", answer)
    assert CATALOG[answer["error"]["code"]].status == status
    assert str(status) in declared(method, template)


def test_unauthorized_is_declared_everywhere_it_can_happen() -> None:
    for method, route, _ in ROUTES:
        path = documented(route)
        responses = declared(method, path)
        if spec()["paths"][path][method.lower()].get("security") == []:
            continue
        assert "401" in responses, f"{method} {path}"


async def test_an_unknown_route_is_a_catalog_not_found(api: Api) -> None:
    status, answer = await api.get("/v1/nowhere")
    assert (status, answer["error"]["code"]) == (404, "not_found")


async def test_batch_is_not_a_notification_id(api: Api) -> None:
    """GET on the batch path is a wrong method, not a search for a notification named batch."""
    for method in ("GET", "OPTIONS"):
        async with api.client.request(method, "/v1/notifications/batch") as resp:
            assert (resp.status, resp.headers["Allow"]) == (405, "POST")
    status, _ = await api.get("/v1/notifications/batchy")
    assert status == 404


async def test_a_wrong_method_gets_its_catalog_status(api: Api) -> None:
    status, answer = await api.call("DELETE", "/v1/notifications")
    check("Error", answer)
    assert CATALOG[answer["error"]["code"]].status == status
