"""The OpenAPI description of the HTTP API; tests check it against the routes and real responses."""

from __future__ import annotations

from typing import Any

from notifyd import __version__
from notifyd.errors import CATALOG

_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
_TIME = {"type": ["string", "null"], "format": "date-time"}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): _json(_ref("Error"), ", ".join(
        c for c, e in CATALOG.items() if e.status == s)) for s in statuses}


SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message", "field"],
        "properties": {"code": {"type": "string", "enum": sorted(CATALOG)}, "message": _STR,
                       "field": _NSTR}}}},
    "AcceptRequest": {"type": "object", "required": ["user_id", "kind"],
                      "additionalProperties": False, "properties": {
        "user_id": _STR, "kind": _STR, "params": {"type": "object"},
        "dedup_key": {"type": "string", "maxLength": 256},
        "fallback_chain": {"type": "array", "items": {
            "type": "object", "required": ["channel"], "additionalProperties": False,
            "properties": {"channel": _STR, "timeout_sec": {"type": ["number", "null"]}}}},
        "max_ttl_sec": {"type": "integer", "minimum": 1}}},
    "Accepted": {"type": "object", "required": ["notification_id", "state", "created"],
                 "properties": {"notification_id": _STR, "state": _STR,
                                "created": {"type": "boolean"}}},
    "Step": {"type": "object", "required": ["step_no", "channel", "status", "send_after",
                                            "attempts", "reason", "attempt_log"],
             "properties": {
        "step_no": {"type": "integer"}, "channel": _STR, "status": _STR, "send_after": _TIME,
        "attempts": {"type": "integer"}, "reason": _NSTR, "note": _NSTR, "provider_ref": _NSTR,
        "updated_at": _TIME, "attempt_log": {"type": "array", "items": {"type": "object"}}}},
    "Status": {"type": "object", "required": [
        "notification_id", "current_state", "delivered_via", "resolution", "steps",
        "total_time_ms"], "properties": {
        "notification_id": _STR, "user_id": _STR, "kind": _STR, "dedup_key": _NSTR,
        "created_at": _TIME, "expires_at": _TIME, "current_state": _STR,
        "delivered_via": _NSTR, "resolution": {"type": ["object", "null"]},
        "steps": {"type": "array", "items": _ref("Step")},
        "total_time_ms": {"type": ["integer", "null"]}}},
    "ResolveRequest": {"type": "object", "additionalProperties": False,
                       "properties": {"resolution": _STR}},
    "ResolutionRequest": {"type": "object", "required": ["user_id", "dedup_key"],
                          "additionalProperties": False, "properties": {
        "user_id": _STR, "dedup_key": _STR, "resolution": _STR}},
    "Resolved": {"type": "object", "required": ["notification_id", "resolution", "resolved_at",
                                                "changed", "cancelled_steps"], "properties": {
        "notification_id": _STR, "resolution": _STR, "resolved_at": _TIME,
        "changed": {"type": "boolean"}, "cancelled_steps": {"type": "integer"}}},
    "User": {"type": "object", "additionalProperties": False, "properties": {
        "email": _STR, "phone": _STR, "chat": {"type": "object",
                                               "additionalProperties": _STR},
        "timezone": _STR, "locale": _STR, "quiet_hours": {
            "type": ["object", "null"], "properties": {"start": _STR, "end": _STR}}}},
    "UserView": {"type": "object", "required": ["user_id", "timezone", "locale", "quiet_hours",
                                                "disabled_contacts"],
                 "properties": {"user_id": _STR, "disabled_contacts": {"type": "object"}}},
}


def _op(summary: str, ok: str, schema: str, errors: tuple[int, ...],
        body: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {ok: _json(_ref(schema), "ok"),
                                                            **_errors(*errors)}}
    if body:
        op["requestBody"] = {"required": body in ("AcceptRequest", "ResolutionRequest", "User"),
                             "content": {"application/json": {"schema": _ref(body)}}}
    return op


def spec() -> dict[str, Any]:
    accept = _op("Accept a notification; 202 only once it and its whole ladder are committed",
                 "202", "Accepted", (400, 401, 403, 409, 413, 422, 503), "AcceptRequest")
    accept["responses"]["200"] = _json(_ref("Accepted"), "a retry of an accepted dedup key")
    accept["parameters"] = [{"name": "Idempotency-Key", "in": "header", "required": False,
                             "schema": _STR, "description": "stands in for dedup_key"}]
    idp = [{"name": "id", "in": "path", "required": True, "schema": _STR}]
    uidp = [{"name": "user_id", "in": "path", "required": True, "schema": _STR}]
    return {
        "openapi": "3.1.0",
        "info": {"title": "notifyd", "version": __version__},
        "components": {"schemas": SCHEMAS, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/notifications": {"post": accept},
            "/v1/notifications/{id}": {"get": {
                **_op("Status of a notification with every step", "200", "Status",
                      (401, 404)), "parameters": idp}},
            "/v1/notifications/{id}/resolve": {"post": {
                **_op("Resolve a notification; the first resolution wins", "200", "Resolved",
                      (400, 401, 404, 422), "ResolveRequest"), "parameters": idp}},
            "/v1/resolutions": {"post": _op(
                "Resolve by user and dedup key", "200", "Resolved", (400, 401, 404, 422),
                "ResolutionRequest")},
            "/v1/users/{user_id}": {
                "put": {**_op("Set a user's contacts, timezone, locale and quiet hours",
                              "200", "UserView", (400, 401, 422), "User"),
                        "parameters": uidp},
                "get": {**_op("A user's profile", "200", "UserView", (401, 404)),
                        "parameters": uidp}},
            "/v1/openapi.json": {"get": {"summary": "This document", "security": [],
                                         "responses": {"200": {"description": "ok"}}}},
            "/healthz": {"get": {"summary": "Liveness", "security": [],
                                 "responses": {"200": {"description": "ok"}}}},
        },
    }
