"""The OpenAPI description of the HTTP API; tests check it against the routes and real responses,
and schemathesis checks the running daemon against it."""

from __future__ import annotations

import json
from typing import Any

from notifyd import __version__
from notifyd.config import FanoutConfig, TokensConfig
from notifyd.core.catalog import MEDIUMS
from notifyd.core.contacts import ADDRESSES, SUPPRESSION_TYPES
from notifyd.core.models import StepState
from notifyd.domain.validate import MAX_ID_LEN
from notifyd.http import openapi_events
from notifyd.http.errors import CATALOG
from notifyd.receipts import PROVIDERS

TOKEN_TTL_MAX = TokensConfig().max_ttl_sec  # unless the config says otherwise
_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
_TIME = {"type": ["string", "null"], "format": "date-time"}
_ID = {"type": "string", "minLength": 1, "maxLength": MAX_ID_LEN}


def _text(max_len: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_len}


def _opt(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field: null is taken as absent."""
    kind = schema["type"]
    return {**schema, "type": [*(kind if isinstance(kind, list) else [kind]), "null"]}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): _json(_ref("Error"), ", ".join(
        c for c, e in CATALOG.items() if e.status == s) or "bad_signature or bad_receipt, "
        "with the status this provider reads as final") for s in statuses}


SEND_AT = ("RFC 3339 (2026-09-21T14:13:20Z): the ladder starts then instead of at accept; every "
           "step's time, quiet hours and the time to live count from it. A time already past is "
           "now; at most server.max_schedule_sec (31 days) ahead; refused for a kind with an "
           "inbox. Compared, like the other fields, when a dedup key is used again.")
BATCH_MAX = 1000


def _batch(item: str, call: str) -> dict[str, Any]:
    """A batch's envelope. Its items are not held to the item schema here: each is checked on
    its own and answered in its place in the results, so a bad one is a 200, not a refusal."""
    return {"type": "object", "required": ["items"], "additionalProperties": False,
            "properties": {"items": {
                "type": "array", "minItems": 1, "maxItems": BATCH_MAX, "items": {
                    "description": f"the body of {call} ({item}); one that is not gets the "
                                   "error that call would answer, in its place"}}}}


def _results(ok: str, statuses: tuple[int, ...]) -> dict[str, Any]:
    """One answer per item, in order: the single call's status beside its body."""
    status = {"status": {"type": "integer", "enum": list(statuses)}}
    refused = {"allOf": [_ref("Error"), {"type": "object", "required": ["status"], "properties": {
        "status": {"type": "integer", "minimum": 400, "maximum": 599}}}]}
    return {"type": "object", "required": ["results"], "properties": {"results": {
        "type": "array", "items": {"anyOf": [
            {"allOf": [_ref(ok), {"type": "object", "required": ["status"],
                                  "properties": status}]}, refused]}}}}


def _counts(fields: dict[str, str]) -> dict[str, Any]:
    return {"type": "object", "required": list(fields), "properties": {
        name: {"type": kind, **({"minimum": 0} if kind == "integer" else {})}
        for name, kind in fields.items()}}


STATE_DOC = ("delivered (proved by a receipt) or resolved; <channel>_pending, <channel>_sending "
             "or <channel>_unknown for the first open step; or how the ladder ended: sent, "
             "presumed_delivered (sent, unproven, past the time to live), held (waiting for a "
             "digest; a new notification of a kind that always digests is held from its "
             "accept), digested (a digest carried it: its step's digest says whether that went "
             "out), expired, opted_out (nothing went: every step was suppressed, at least one by "
             "the person's preferences), undeliverable (nothing went: failed, rejected or "
             "suppressed)")
_STATE = {"type": "string", "description": STATE_DOC, "pattern":
          r"^(resolved|delivered|sent|presumed_delivered|held|digested|expired|opted_out"
          r"|undeliverable|.+_(pending|sending|unknown))$"}

_QUIET = {"type": ["object", "null"], "required": ["start", "end"],
          "additionalProperties": False, "properties": {
              "start": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"},
              "end": {"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"}}}
SCHEMAS: dict[str, Any] = {
    "Error": {"type": "object", "required": ["error"], "properties": {"error": {
        "type": "object", "required": ["code", "message", "field"],
        "properties": {"code": {"type": "string", "enum": sorted(CATALOG)}, "message": _STR,
                       "field": _NSTR}}}},
    "AcceptRequest": {"type": "object", "required": ["user_id", "kind"],
                      "additionalProperties": False, "properties": {
        "user_id": _ID, "kind": _ID, "params": {"type": "object"},
        "dedup_key": _opt(_ID),
        "fallback_chain": {"type": ["array", "null"], "minItems": 1, "maxItems": 16, "items": {
            "type": "object", "required": ["channel"], "additionalProperties": False,
            "properties": {"channel": _STR, "timeout_sec": {"type": ["number", "null"],
                                                            "minimum": 0}}}},
        "max_ttl_sec": {"type": ["integer", "null"], "minimum": 1, "maximum": 30 * 86400},
        "send_at": {"type": ["string", "null"], "format": "date-time", "description": SEND_AT}}},
    "Accepted": {"type": "object", "required": ["notification_id", "state", "created"],
                 "properties": {"notification_id": _STR, "state": _STATE,
                                "created": {"type": "boolean"}}},
    "Step": {"type": "object", "required": ["step_no", "channel", "status", "send_after",
                                            "attempts", "reason", "attempt_log"],
             "properties": {
        "step_no": {"type": "integer"}, "channel": _STR,
        "status": {"type": "string", "enum": [s.value for s in StepState]},
        "send_after": _TIME, "attempts": {"type": "integer"}, "reason": _NSTR, "note": _NSTR,
        "provider_ref": _NSTR, "template": _NSTR, "updated_at": _TIME,
        "pref_version": {"type": ["integer", "null"]},
        "evidence": {"type": ["string", "null"], "enum": [None, "accepted", "delivered",
                                                          "shown", "opened"]},
        "timed_out": {"type": "boolean"},
        "digest": {"type": ["object", "null"], "description": "the digest that carried it "
                   "(status digested), and whether that went out", "required": [
                       "notification_id", "current_state", "sent_via"], "properties": {
            "notification_id": _STR,
            "current_state": {**_STATE, "type": ["string", "null"], "description": "the "
                              "digest's own state; null once it is no longer on record"},
            "sent_via": {"type": "array", "items": _STR, "description": "the channels it "
                         "went out on"}}},
        "receipts": {"type": "array", "items": {"type": "object"}},
        "attempt_log": {"type": "array", "items": {"type": "object"}}}},
    "Status": {"type": "object", "required": [
        "notification_id", "current_state", "delivered_via", "sent_via", "resolution", "steps",
        "total_time_ms"], "properties": {
        "notification_id": _STR, "user_id": _STR, "kind": _STR, "dedup_key": _NSTR,
        "created_at": _TIME, "expires_at": _TIME, "current_state": _STATE,
        "send_at": {**_TIME, "description": "a scheduled one: when its ladder started (or "
                    "starts); null for one sent at once"},
        "delivered_via": {**_NSTR, "description": "the channel a receipt proved delivery on; "
                          "null while nothing proves it"},
        "sent_via": {"type": "array", "items": _STR, "description": "the channels of the steps "
                     "a provider took, in ladder order, proved or not"},
        "resolution": {"type": ["object", "null"]},
        "steps": {"type": "array", "items": _ref("Step")},
        "total_time_ms": {"type": ["integer", "null"]},
        "pruned_at": {"type": ["string", "null"], "format": "date-time", "description":
                      "When retention pruned its history: steps is then empty and "
                      "current_state is how it ended."},
        "event_id": {"type": ["string", "null"], "description": "the event it was made for "
                     "(POST /v1/events); null for one posted on its own"}}},
    "ResolveRequest": {"type": "object", "additionalProperties": False,
                       "properties": {"resolution": _opt(_text(200))}},
    "ResolutionRequest": {"type": "object", "required": ["user_id", "dedup_key"],
                          "additionalProperties": False, "properties": {
        "user_id": _ID, "dedup_key": _ID, "resolution": _opt(_text(200))}},
    "Resolved": {"type": "object", "required": ["notification_id", "resolution", "resolved_at",
                                                "changed", "cancelled_steps"], "properties": {
        "notification_id": _STR, "resolution": _STR, "resolved_at": _TIME,
        "changed": {"type": "boolean"}, "cancelled_steps": {"type": "integer"}}},
    "AcceptBatch": _batch("AcceptRequest", "POST /v1/notifications"),
    "AcceptResults": _results("Accepted", (200, 202)),
    "ResolutionBatch": _batch("ResolutionRequest", "POST /v1/resolutions"),
    "ResolutionResults": _results("Resolved", (200,)),
    "User": {"type": "object", "additionalProperties": False, "properties": {
        **{a.field: {**_opt(_ID), "description": a.shape,
                     **({"pattern": a.pattern.pattern} if a.pattern else {})} for a in ADDRESSES},
        "timezone": {**_opt(_text(64)), "description": "an IANA zone, e.g. Europe/Paris"},
        "locale": _opt(_text(35)), "quiet_hours": _QUIET}},
    "UserPatch": {"type": "object", "description": "a JSON merge patch (RFC 7396) of the profile: "
                  "the fields it names change, null clears one, the rest stay",
                  "additionalProperties": False, "properties": {
        **{a.field: {**_opt(_ID), "description": a.shape,
                     **({"pattern": a.pattern.pattern} if a.pattern else {})} for a in ADDRESSES},
        "timezone": {**_opt(_text(64)), "description": "an IANA zone, e.g. Europe/Paris"},
        "locale": _opt(_text(35)), "quiet_hours": {
            "type": ["object", "null"], "additionalProperties": False,
            "description": "merged into the current quiet hours: both ends must hold after it",
            "properties": {"start": _opt({"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"}),
                           "end": _opt({"type": "string", "pattern": "^[0-9]{2}:[0-9]{2}$"})}}}},
    "UserView": {"type": "object", "required": ["user_id", "timezone", "locale", "quiet_hours",
                                                "disabled_contacts", "devices"],
                 "properties": {"user_id": _STR, "disabled_contacts": {"type": "object"},
                                "devices": {"type": "array", "items": _ref("Device")}}},
    "Erased": {"type": "object", "required": [
        "user_id", "erased_at", "removed", "cancelled", "scrubbed", "suppressions"],
        "properties": {
            "user_id": _STR, "erased_at": _TIME,
            "removed": _counts({"profile": "boolean", "preferences": "boolean",
                                "devices": "integer", "inbox_items": "integer"}),
            "cancelled": _counts({"notifications": "integer", "steps": "integer"}),
            "scrubbed": _counts({"params": "integer", "payloads": "integer",
                                 "receipts": "integer"}),
            "suppressions": _counts({"hashed": "integer", "kept": "integer"})}},
    "DeviceRequest": {"oneOf": [
        {"type": "object", "required": ["endpoint", "keys"], "additionalProperties": False,
         "description": "a browser's PushSubscription.toJSON()",
         "properties": {"type": {"type": "string", "enum": ["webpush"]},
                        "endpoint": {**_text(2048), "format": "uri"},
                        "expirationTime": {"type": ["number", "null"]},
                        "keys": {"type": "object", "required": ["p256dh", "auth"],
                                 "additionalProperties": False, "properties": {
                                     "p256dh": {**_text(256), "pattern": "^[A-Za-z0-9_-]+={0,2}$"},
                                     "auth": {**_text(256), "pattern": "^[A-Za-z0-9_-]+={0,2}$"}}}}},
        {"type": "object", "required": ["type", "token"], "additionalProperties": False,
         "description": "an FCM registration token",
         "properties": {"type": {"type": "string", "enum": ["fcm"]}, "token": _text(4096)}}]},
    "Device": {"type": "object", "required": ["device_id", "type", "state", "reason"],
               "properties": {"device_id": _STR, "type": {"type": "string",
                                                           "enum": ["webpush", "fcm"]},
                              "host": _NSTR, "state": {"type": "string",
                                                        "enum": ["live", "dead"]},
                              "reason": _NSTR}},
    "SuppressionRequest": {"type": "object", "required": ["channel_type", "address"],
                           "additionalProperties": False, "properties": {
                               "channel_type": {"type": "string", "enum": list(SUPPRESSION_TYPES)},
                               "address": {"type": "string", "minLength": 1, "maxLength": 320,
                                           "description": "email address, E.164 number, chat "
                                                          "id, or a push device id (d_...)"},
                               "reason": {"type": "string", "maxLength": 200}}},
    "Suppression": {"type": "object", "required": [
        "channel_type", "address", "reason", "source", "evidence", "created_at", "scope"],
        "properties": {"channel_type": {"type": "string", "enum": list(SUPPRESSION_TYPES)},
                       "address": _STR, "reason": _STR, "source": _STR, "evidence": _NSTR,
                       "created_at": _TIME, "created": {"type": "boolean"},
                       "scope": {"type": "string", "enum": ["tenant", "all tenants"]}}},
    "Suppressions": {"type": "object", "required": ["suppressions"], "properties": {
        "suppressions": {"type": "array", "items": _ref("Suppression")}}},
    "Preferences": {"type": "object", "required": ["version", "opt_out", "categories"],
                    "properties": {
        "version": {"type": "integer", "description": "bumped by every change; each claim "
                                                     "records the version it read"},
        "opt_out": {"type": "boolean"},
        "categories": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["optional", *MEDIUMS], "properties": {
                "optional": {"type": "boolean"}, **{m: {"type": "boolean"} for m in MEDIUMS}}}},
        "timezone": _NSTR, "quiet_hours": _QUIET}},
    "PreferencesRequest": {"type": "object", "additionalProperties": False, "properties": {
        "version": {"type": "integer", "minimum": 0, "description": "the version the page "
                    "read: if another change came since, 412 precondition_failed and nothing "
                    "is written. Left out: written over any version"},
        "opt_out": {"type": "boolean"},
        "categories": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "properties": {m: {"type": "boolean"} for m in MEDIUMS}}},
        "timezone": {**_opt(_text(64)), "description": "an IANA zone, e.g. Europe/Paris; left "
                     "out: as it is"},
        "quiet_hours": {**_QUIET, "description": "left out: as they are"}}},
    "PreferencesPatch": {"type": "object", "additionalProperties": False, "description":
                         "a JSON merge patch (RFC 7396) of what the person chose: null puts a "
                         "switch, or a whole category, back to its default", "properties": {
        "opt_out": {"type": ["boolean", "null"]},
        "categories": {"type": ["object", "null"], "additionalProperties": {
            "type": ["object", "null"], "additionalProperties": False,
            "properties": {m: {"type": ["boolean", "null"]} for m in MEDIUMS}}}}},
    "InboxItem": {"type": "object", "required": ["id", "kind", "title", "created_at", "read"],
                  "properties": {"id": _STR, "kind": _STR, "title": _STR, "body": _NSTR,
                                 "created_at": _TIME, "read": {"type": "boolean"},
                                 "read_at": _TIME, "archived": {"type": "boolean"}}},
    "InboxPage": {"type": "object", "required": ["items", "next"], "properties": {
        "items": {"type": "array", "items": _ref("InboxItem")},
        "next": {"type": ["string", "null"], "description": "the before= of the next page"}}},
    "Badge": {"type": "object", "required": ["unread"],
              "properties": {"unread": {"type": "integer", "minimum": 0}}},
    "InboxChange": {"type": "object", "required": ["unread"], "properties": {
        "id": _STR, "read": {"type": "boolean"}, "archived": {"type": "boolean"},
        "unread": {"type": "integer", "minimum": 0},
        "resolved": {"type": ["boolean", "integer"]}}},
    "TokenRequest": {"type": "object", "additionalProperties": False, "properties": {
        "ttl_sec": {"type": "integer", "minimum": 60, "maximum": TOKEN_TTL_MAX,
                    "description": "at most tokens.max_ttl_sec"}}},
    "Token": {"type": "object", "required": ["token", "user_id", "expires_at"], "properties": {
        "token": _STR, "user_id": _STR, "expires_at": _TIME}},
    "Devices": {"type": "object", "required": ["devices"],
                "properties": {"devices": {"type": "array", "items": _ref("Device")}}},
    "Decision": {"type": "object", "description": "the data of a decision event on "
                 "GET /v1/decisions/stream", "required": [
        "at", "decision", "notification_id", "step_no", "channel", "kind", "user_id", "reason"],
        "properties": {"at": _TIME, "decision": {"type": "string", "description": (
            "accepted, sending, sent, failed/unknown with its retry time, rejected, dead, "
            "cancelled, postponed, expired, suppressed, held for a digest")},
            "notification_id": _STR, "step_no": {"type": ["integer", "null"]},
            "channel": _NSTR, "kind": _STR, "user_id": _STR, "reason": _NSTR}},
    "Ready": {"type": "object", "required": ["status", "checks"], "properties": {
        "status": {"type": "string", "enum": ["ready", "not_ready"]},
        "checks": {"type": "object", "additionalProperties": _STR}}},
}


def _op(summary: str, ok: str, schema: str, errors: tuple[int, ...],
        body: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {ok: _json(_ref(schema), "ok"),
                                                            **_errors(*errors)}}
    if body:
        media = ("application/merge-patch+json", "application/json") if body.endswith(
            "Patch") else ("application/json",)
        op["requestBody"] = {"required": body in ("AcceptRequest", "ResolutionRequest", "User",
                                                  "DeviceRequest", "SuppressionRequest",
                                                  "PreferencesRequest", "AcceptBatch",
                                                  "ResolutionBatch", "EventRequest",
                                                  "MembersRequest", "UserPatch",
                                                  "PreferencesPatch"),
                             "content": {m: {"schema": _ref(body)} for m in media}}
    return op


def _public(summary: str, responses: dict[str, Any]) -> dict[str, Any]:
    return {"get": {"summary": summary, "security": [], "responses": responses}}


def spec(kinds: list[str] | None = None, channels: list[str] | None = None,
         token_ttl_max: int = TOKEN_TTL_MAX,
         max_inline_users: int = FanoutConfig.max_inline_users) -> dict[str, Any]:
    """The document; given the configured kinds and channels, their names are enums in it, and
    a token's longest ttl_sec is tokens.max_ttl_sec."""
    schemas = {**SCHEMAS, **openapi_events.schemas(max_inline_users)}
    if kinds is not None or channels is not None or token_ttl_max != TOKEN_TTL_MAX:
        schemas = json.loads(json.dumps(schemas))  # a copy to narrow
        schemas["TokenRequest"]["properties"]["ttl_sec"]["maximum"] = token_ttl_max
        props = schemas["AcceptRequest"]["properties"]
        if kinds is not None:
            props["kind"] = {"type": "string", "enum": sorted(kinds)}
        if channels is not None:
            props["fallback_chain"]["items"]["properties"]["channel"] = {
                "type": "string", "enum": sorted(channels)}
    accept = _op("Accept a notification; 202 only once it and its whole ladder are committed",
                 "202", "Accepted", (400, 401, 403, 408, 409, 413, 422, 503), "AcceptRequest")
    accept["responses"]["200"] = _json(_ref("Accepted"), "a retry of an accepted dedup key")
    accept["parameters"] = [{"name": "Idempotency-Key", "in": "header", "required": False,
                             "schema": _ID, "description": "stands in for dedup_key"}]
    suppress = _op("Stop sending to an address (201; 200 if it already was)", "201",
                   "Suppression", (400, 401, 403, 404, 408, 422), "SuppressionRequest")
    suppress["responses"]["200"] = _json(_ref("Suppression"), "it already was")
    idp = [{"name": "id", "in": "path", "required": True, "schema": _STR}]
    token_param = [{"name": "token", "in": "query", "required": False, "schema": _STR,
                    "description": "a user token, for pages that cannot send headers"}]
    html_page = {"description": "a page for a person", "content": {"text/html": {
        "schema": _STR}}}
    link_param = {"name": "token", "in": "path", "required": True, "schema": _STR}
    uidp = [{"name": "user_id", "in": "path", "required": True, "schema": _ID}]
    item_params = [*uidp, {"name": "item_id", "in": "path", "required": True, "schema": _STR}]

    def person(op: dict[str, Any]) -> dict[str, Any]:
        """A person's own call: a producer's key (scope users) or that user's token."""
        return {**op, "parameters": uidp, "security": [{"bearer": []}],
                "description": "Authorization: Bearer <API key with the users scope> or "
                               "Bearer <that user's user token>"}

    def tagged(op: dict[str, Any]) -> dict[str, Any]:
        """Its 200 carries the preferences' version as a strong ETag."""
        op["responses"]["200"]["headers"] = {"ETag": {"schema": {
            "type": "string", "pattern": '^"[0-9]+"$'}, "description": "the version, quoted"}}
        return op

    def matched(op: dict[str, Any]) -> dict[str, Any]:
        """A change that If-Match may make conditional: 412 when it names another version."""
        op["parameters"] = [*op["parameters"], {
            "name": "If-Match", "in": "header", "required": False, "schema": _STR,
            "description": "the ETag this change was made from; another is 412 "
                           "precondition_failed"}]
        return tagged(op)
    return {
        "openapi": "3.1.0",
        "info": {"title": "notifyd", "version": __version__},
        "components": {"schemas": schemas, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": {
            "/v1/notifications": {"post": accept},
            "/v1/notifications/batch": {"post": _op(
                f"Accept up to {BATCH_MAX} notifications in one write: one result per item, in "
                "order, each what POST /v1/notifications would answer for it (a bad item never "
                "fails the others); 200 once every accepted item is committed. The batch as a "
                "whole is refused only for its key, its envelope, its size "
                "(server.max_batch_body_bytes), or a store that sheds or fails (nothing of it "
                "is accepted)", "200", "AcceptResults",
                (400, 401, 403, 408, 413, 422, 503), "AcceptBatch")},
            "/v1/notifications/{id}": {"get": {
                **_op("Status of a notification with every step", "200", "Status",
                      (401, 403, 404)), "parameters": idp}},
            "/v1/notifications/{id}/resolve": {"post": {
                **_op("Resolve a notification; the first resolution wins", "200", "Resolved",
                      (400, 401, 403, 404, 408, 422), "ResolveRequest"), "parameters": idp}},
            "/v1/resolutions": {"post": _op(
                "Resolve by user and dedup key", "200", "Resolved",
                (400, 401, 403, 404, 408, 422),
                "ResolutionRequest")},
            "/v1/resolutions/batch": {"post": _op(
                f"Resolve up to {BATCH_MAX} notifications by user and dedup key in one write: "
                "one result per item, in order, each what POST /v1/resolutions would answer "
                "for it", "200", "ResolutionResults", (400, 401, 403, 408, 413, 422),
                "ResolutionBatch")},
            "/v1/users/{user_id}": {
                "put": {**_op("Set a user's contacts, timezone, locale and quiet hours",
                              "200", "UserView", (400, 401, 403, 408, 422), "User"),
                        "parameters": uidp},
                "get": {**_op("A user's profile and contact state", "200", "UserView",
                              (401, 403, 404, 422)), "parameters": uidp},
                "patch": {**_op("Change the profile's fields a JSON merge patch names (null "
                                "clears one); the others stay", "200", "UserView",
                                (400, 401, 403, 408, 422), "UserPatch"), "parameters": uidp},
                "delete": {**_op(
                    "Erase the person: profile, contacts, preferences, devices and inbox go; "
                    "open notifications are resolved erased; params, frozen messages and "
                    "receipts' addresses are scrubbed; suppressions of their addresses stay as "
                    "one-way hashes; user tokens made before now are refused. A key for every "
                    "kind", "200", "Erased", (401, 403, 422)), "parameters": uidp}},
            "/v1/users/{user_id}/devices": {
                "post": {**_op("Register a push device (again: the same device, live)", "201",
                               "Device", (400, 401, 403, 408, 422), "DeviceRequest"),
                         "parameters": uidp},
                "get": {**_op("A user's devices with their state", "200", "Devices",
                              (401, 403, 422)), "parameters": uidp}},
            "/v1/users/{user_id}/devices/{device_id}": {"delete": {
                "summary": "Remove a device", "parameters": [
                    *uidp, {"name": "device_id", "in": "path", "required": True,
                            "schema": _STR}],
                "responses": {"204": {"description": "removed"},
                              **_errors(401, 403, 404, 422)}}},
            "/v1/users/{user_id}/tokens": {"post": {
                **_op("A short-lived user token for one user's own inbox and preferences "
                      "(a producer's key only)", "201", "Token", (400, 401, 403, 408, 422),
                      "TokenRequest"), "parameters": uidp}},
            "/v1/users/{user_id}/preferences": {
                "get": tagged(person(_op("The person's preferences, with each category's "
                                         "defaults; ETag: their version", "200", "Preferences",
                                         (401, 403, 422)))),
                "put": matched(person(_op(
                    "Replace the person's preferences (a new version); with If-Match (or the "
                    "body's version), only while it names the current version", "200", "Preferences",
                    (400, 401, 403, 408, 412, 422), "PreferencesRequest"))),
                "patch": matched(person(_op(
                    "Change what a JSON merge patch names of the person's preferences (a new "
                    "version); with If-Match, only while it names the current version", "200",
                    "Preferences", (400, 401, 403, 408, 412, 422), "PreferencesPatch")))},
            "/v1/users/{user_id}/inbox": {"get": {**person(_op(
                "A page of the inbox, newest first, by a stable (created_at, id) cursor",
                "200", "InboxPage", (401, 403, 422))), "parameters": [
                *uidp, *token_param,
                {"name": "before", "in": "query", "required": False, "schema": _STR},
                {"name": "limit", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
                {"name": "archived", "in": "query", "required": False,
                 "schema": {"type": "string", "enum": ["true", "false"]}}]}},
            "/v1/users/{user_id}/inbox/badge": {"get": {**person(_op(
                "The unread count (a maintained counter)", "200", "Badge", (401, 403, 422)))}},
            "/v1/users/{user_id}/inbox/stream": {"get": {
                "summary": "Server-Sent Events: item (id: its seq; resume with Last-Event-ID), "
                           "badge, read, archived", "parameters": [
                    *uidp, *token_param,
                    {"name": "Last-Event-ID", "in": "header", "required": False,
                     "schema": {"type": "string", "pattern": "^[0-9]+$"}}],
                "responses": {"200": {"description": "the stream", "content": {
                    "text/event-stream": {"schema": _STR}}}, **_errors(401, 403, 422, 503)}}},
            "/v1/users/{user_id}/inbox/read-all": {"post": {**person(_op(
                "Mark every item read (kinds with stop = read are resolved)", "200",
                "InboxChange", (401, 403, 422)))}},
            "/v1/users/{user_id}/inbox/{item_id}/read": {"post": {**person(_op(
                "Mark one item read (a kind with stop = read is resolved)", "200",
                "InboxChange", (401, 403, 404, 422))), "parameters": [*item_params]}},
            "/v1/users/{user_id}/inbox/{item_id}/archive": {"post": {**person(_op(
                "Archive one item (out of pages and the badge)", "200", "InboxChange",
                (401, 403, 404, 422))), "parameters": [*item_params]}},
            "/v1/unsubscribe/{token}": {
                "get": {"summary": "One-click unsubscribe: the confirmation page",
                        "security": [], "parameters": [link_param],
                        "responses": {"200": html_page, "404": html_page}},
                "post": {"summary": "One-click unsubscribe (RFC 8058): the category is off at once",
                         "security": [], "parameters": [link_param],
                         "requestBody": {"required": False, "content": {
                             "application/x-www-form-urlencoded": {"schema": {}}}},
                         "responses": {"200": html_page, "400": html_page,
                                       "404": html_page, **_errors(408, 413)}}},
            "/v1/suppressions": {
                "get": {**_op("The tenant's suppression list (and the account-wide one), "
                              "newest first", "200", "Suppressions", (401, 403, 422)),
                        "parameters": [
                            {"name": "address", "in": "query", "required": False,
                             "schema": _STR},
                            {"name": "limit", "in": "query", "required": False,
                             "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}]},
                "post": suppress},
            "/v1/suppressions/{channel_type}/{address}": {"delete": {
                "summary": "Send to an address again (the tenant's own entries only)",
                "parameters": [
                    {"name": "channel_type", "in": "path", "required": True,
                     "schema": {"type": "string", "enum": list(SUPPRESSION_TYPES)}},
                    {"name": "address", "in": "path", "required": True, "schema": _STR}],
                "responses": {"204": {"description": "removed"},
                              **_errors(401, 403, 404, 422)}}},
            "/v1/webhooks/{provider}": {"post": {
                "summary": "A provider's delivery receipts, in its own format and signature "
                           "scheme; 404 unless [webhooks.PROVIDER] is configured",
                "security": [], "parameters": [{
                    "name": "provider", "in": "path", "required": True,
                    "schema": {"type": "string", "enum": list(PROVIDERS)}}],
                "requestBody": {"required": False, "content": {"*/*": {"schema": {}}}},
                "responses": {"200": {"description": "stored and applied (a provider's own "
                                                     "reply body, e.g. TwiML for Twilio)"},
                              **_errors(400, 401, 403, 404, 406, 408, 413, 503)}}},
            "/v1/decisions/stream": {"get": {
                "summary": "The engine's decisions as they happen (notifyd tail), as "
                           "Server-Sent Events: open ({kind, channel, user_id}: the filter; "
                           "what follows it is seen), decision (data: a Decision), lost "
                           "({count}: entries dropped for a slow reader); a key with the read "
                           "scope sees its tenant's, of its kinds", "parameters": [
                    {"name": "kind", "in": "query", "required": False, "schema": _ID},
                    {"name": "channel", "in": "query", "required": False, "schema": _ID},
                    {"name": "user_id", "in": "query", "required": False, "schema": _ID}],
                "responses": {"200": {"description": "the stream", "content": {
                    "text/event-stream": {"schema": _STR}}}, **_errors(401, 403, 422, 503)}}},
            "/v1/openapi.json": _public("This document", {"200": {"description": "ok"}}),
            "/healthz": _public("Liveness: the process answers; nothing is touched",
                                {"200": {"description": "ok"}}),
            "/readyz": _public(
                "Readiness of the daemon itself: the store takes writes, the scanner loops, the "
                "event loop keeps time (a provider's outage never fails it)",
                {"200": _json(_ref("Ready"), "ready"),
                 "503": _json(_ref("Ready"), "not ready: each check says why")}),
            "/metrics": _public("Prometheus metrics (text exposition format)", {"200": {
                "description": "ok", "content": {"text/plain": {"schema": _STR}}}}),
            **openapi_events.paths(_op, _errors, _json, _ref),
        },
    }
