"""The OpenAPI description of the HTTP API: the JSON Schema of every body, made by msgspec from
its Struct (notifyd/shapes), and a line per path saying its method, summary, request Struct,
answers and error statuses. Tests hold it to the routes and to real answers, and schemathesis
holds the running daemon to it."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import msgspec

from notifyd import __version__
from notifyd.config import FanoutConfig, TokensConfig
from notifyd.core.contacts import SUPPRESSION_TYPES
from notifyd.http.errors import CATALOG
from notifyd.receipts import PROVIDERS
from notifyd.shapes import common, events, notifications, people
from notifyd.shapes.common import BATCH_MAX, Id, ref
from notifyd.shapes.events import EventId, TopicName
from notifyd.shapes.notifications import Status
from notifyd.shapes.people import Preferences, UserView

TOKEN_TTL_MAX = TokensConfig().max_ttl_sec  # unless the config says otherwise
Shape = type[msgspec.Struct]
_STR = {"type": "string"}


def _schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of a type of the shapes (a path's parameter)."""
    return dict(msgspec.json.schema(tp))


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int) -> dict[str, Any]:
    return {str(s): _json(ref("Error"), ", ".join(
        c for c, e in CATALOG.items() if e.status == s) or "bad_signature or bad_receipt, "
        "with the status this provider reads as final") for s in statuses}


def op(summary: str, answers: dict[int, Shape | tuple[Shape, str]], errors: tuple[int, ...],
       body: Shape | tuple[Shape, ...] | None = None, optional: bool = False,
       params: list[dict[str, Any]] | None = None, **more: Any) -> dict[str, Any]:
    """One operation: its answers by status (a Struct, with its description if not "ok"), the
    error statuses it may answer, the Struct of its body (several: one of them; `optional`: it
    may be left out), its parameters and anything else of it (security, description)."""
    responses: dict[str, Any] = {}
    for status, shape in answers.items():
        shape, said = shape if isinstance(shape, tuple) else (shape, "ok")
        responses[str(status)] = _json(ref(shape.__name__), said)
    out: dict[str, Any] = {"summary": summary, "responses": {**responses, **_errors(*errors)},
                           **more}
    if params:
        out["parameters"] = params
    if body is not None:
        shapes = body if isinstance(body, tuple) else (body,)
        schema = ref(shapes[0].__name__) if len(shapes) == 1 else {
            "oneOf": [ref(s.__name__) for s in shapes]}
        media = ("application/merge-patch+json", "application/json") if shapes[0].__name__ \
            .endswith("Patch") else ("application/json",)
        out["requestBody"] = {"required": not optional,
                              "content": {m: {"schema": schema} for m in media}}
    return out


def _param(name: str, where: str, schema: Any, description: str | None = None,
           required: bool | None = None) -> dict[str, Any]:
    out = {"name": name, "in": where, "required": where == "path" if required is None
           else required, "schema": schema if isinstance(schema, dict) else _schema(schema)}
    return {**out, "description": description} if description else out


def _gone(summary: str, params: list[dict[str, Any]], *errors: int,
          said: str = "removed") -> dict[str, Any]:
    """A DELETE answered 204."""
    return {"summary": summary, "parameters": params,
            "responses": {"204": {"description": said}, **_errors(*errors)}}


def _stream(summary: str, params: list[dict[str, Any]]) -> dict[str, Any]:
    return {"summary": summary, "parameters": params, "responses": {
        "200": {"description": "the stream", "content": {"text/event-stream": {
            "schema": _STR}}}, **_errors(401, 403, 422, 429, 503)}}


def _public(summary: str, responses: dict[str, Any]) -> dict[str, Any]:
    return {"get": {"summary": summary, "security": [], "responses": responses}}


ID = _param("id", "path", _STR)
USER = _param("user_id", "path", Id)
ITEM = [USER, _param("item_id", "path", _STR)]
TOPIC = _param("topic", "path", TopicName)
TOKEN = _param("token", "query", _STR, "a user token, for pages that cannot send headers")
LINK = _param("token", "path", _STR)
LIMIT = {"type": "integer", "minimum": 1}
PERSON: dict[str, Any] = {"security": [{"bearer": []}], "description": "Authorization: Bearer <API key with "
          "the users scope> or Bearer <that user's user token>; a key limited to some kinds: "
          "their items only, with read (to list and count) or resolve (to change)"}
FOLLOWER: dict[str, Any] = {"description": "Authorization: Bearer <API key for every kind with the topics "
            "scope> or Bearer <that user's user token> (self-service topics only)"}
HTML = {"description": "a page for a person", "content": {"text/html": {"schema": _STR}}}
ETAG = {"ETag": {"schema": {"type": "string", "pattern": '^"[0-9]+"$'},
                 "description": "the version, quoted"}}
IF_MATCH = _param("If-Match", "header", _STR, "the ETag this change was made from; another is "
                  "412 precondition_failed", required=False)


def _tagged(o: dict[str, Any]) -> dict[str, Any]:
    """Its 200 carries the preferences' version as a strong ETag."""
    o["responses"]["200"]["headers"] = ETAG
    return o


def _notifications() -> dict[str, Any]:
    n = notifications
    return {
        "/v1/notifications": {"post": op(
            "Accept a notification; 202 only once it and its whole ladder are committed",
            {202: n.Accepted, 200: (n.Accepted, "a retry of an accepted dedup key")},
            (400, 401, 403, 408, 409, 413, 422, 429, 503), n.AcceptRequest, params=[_param(
                "Idempotency-Key", "header", Id, "stands in for dedup_key", False)])},
        "/v1/notifications/batch": {"post": op(
            f"Accept up to {BATCH_MAX} notifications in one write: one result per item, in "
            "order, each what POST /v1/notifications would answer for it (a bad item never "
            "fails the others); 200 once every accepted item is committed. The batch as a "
            "whole is refused only for its key, its envelope, its size "
            "(server.max_batch_body_bytes), its tenant's quota of batch items (429), or a store "
            "that sheds or fails (nothing of it is accepted)", {200: n.AcceptResults},
            (400, 401, 403, 408, 413, 422, 429, 503),
            n.AcceptBatch)},
        "/v1/notifications/{id}": {"get": op(
            "Status of a notification with every step", {200: Status}, (401, 403, 404),
            params=[ID])},
        "/v1/notifications/{id}/resolve": {"post": op(
            "Resolve a notification; the first resolution wins", {200: n.Resolved},
            (400, 401, 403, 404, 408, 422), n.ResolveRequest, optional=True, params=[ID])},
        "/v1/resolutions": {"post": op(
            "Resolve by user and dedup key", {200: n.Resolved}, (400, 401, 403, 404, 408, 422),
            n.ResolutionRequest)},
        "/v1/resolutions/batch": {"post": op(
            f"Resolve up to {BATCH_MAX} notifications by user and dedup key in one write: one "
            "result per item, in order, each what POST /v1/resolutions would answer for it",
            {200: n.ResolutionResults}, (400, 401, 403, 408, 413, 422), n.ResolutionBatch)},
        "/v1/webhooks/{provider}": {"post": {
            "summary": "A provider's delivery receipts, in its own format and signature scheme; "
                       "404 unless [webhooks.PROVIDER] is configured",
            "security": [], "parameters": [_param("provider", "path", {
                "type": "string", "enum": list(PROVIDERS)})],
            "requestBody": {"required": False, "content": {"*/*": {"schema": {}}}},
            "responses": {"200": {"description": "stored and applied (a provider's own reply "
                                                 "body, e.g. TwiML for Twilio)"},
                          **_errors(400, 401, 403, 404, 406, 408, 413, 503)}},
            "get": {
                "summary": "A provider's check of the webhook's URL before it posts to it "
                           "(Meta's: hub.challenge echoed when hub.verify_token is ours); 404 "
                           "unless the provider makes one and [webhooks.PROVIDER] is configured",
                "security": [], "parameters": [
                    _param("provider", "path", {"type": "string", "enum": [
                        name for name, p in PROVIDERS.items() if p.handshake]}),
                    *(_param(f"hub.{name}", "query", _STR) for name in (
                        "mode", "verify_token", "challenge"))],
                "responses": {"200": {"description": "hub.challenge, as text", "content": {
                    "text/plain": {"schema": {"type": "string"}}}},
                    **_errors(400, 403, 404)}}},
        "/v1/webhooks/{provider}/{tenant}": {"post": {
            "summary": "One tenant's delivery receipts, verified with that tenant's own secret "
                       "alone ([webhooks.PROVIDER.tenants.TENANT]); 404 unless the provider "
                       "takes a secret per tenant and is configured",
            "security": [], "parameters": [
                _param("provider", "path", {"type": "string", "enum": [
                    name for name, p in PROVIDERS.items() if p.per_tenant]}),
                _param("tenant", "path", _STR)],
            "requestBody": {"required": False, "content": {"*/*": {"schema": {}}}},
            "responses": {"200": {"description": "stored and applied"},
                          **_errors(400, 401, 404, 408, 413, 503)}}},
        "/v1/decisions/stream": {"get": _stream(
            "The engine's decisions as they happen (notifyd tail), as Server-Sent Events: open "
            "({kind, channel, user_id}: the filter; what follows it is seen), decision (data: a "
            "Decision), lost ({count}: entries dropped for a slow reader); a key with the read "
            "scope sees its tenant's, of its kinds",
            [_param(name, "query", Id) for name in ("kind", "channel", "user_id")])},
        "/v1/openapi.json": _public("This document", {"200": {"description": "ok"}}),
        "/healthz": _public("Liveness: the process answers; nothing is touched",
                            {"200": _json(ref("Health"), "ok")}),
        "/readyz": _public(
            "Readiness of the daemon itself: the store takes writes, the scanner loops, the "
            "event loop keeps time (a provider's outage never fails it)",
            {"200": _json(ref("Ready"), "ready"),
             "503": _json(ref("Ready"), "not ready: each check says why")}),
        "/metrics": _public("Prometheus metrics (text exposition format)", {"200": {
            "description": "ok", "content": {"text/plain": {"schema": _STR}}}}),
    }


def _users() -> dict[str, Any]:
    p = people
    return {
        "/v1/users/{user_id}": {
            "put": op("Set a user's contacts, timezone, locale and quiet hours",
                      {200: UserView}, (400, 401, 403, 408, 422), p.User, params=[USER]),
            "get": op("A user's profile and contact state", {200: UserView},
                      (401, 403, 404, 422), params=[USER]),
            "patch": op("Change the profile's fields a JSON merge patch names (null clears "
                        "one); the others stay", {200: UserView}, (400, 401, 403, 408, 422),
                        p.UserPatch, params=[USER]),
            "delete": op(
                "Erase the person: profile, contacts, preferences, devices and inbox go; open "
                "notifications are resolved erased; params, frozen messages and receipts' "
                "addresses are scrubbed; suppressions of their addresses stay as one-way "
                "hashes; user tokens made before now are refused. A key for every kind",
                {200: p.Erased}, (401, 403, 422), params=[USER])},
        "/v1/users/{user_id}/devices": {
            "post": op("Register a push device (again: the same device, live)",
                       {201: p.Device}, (400, 401, 403, 408, 422),
                       (p.WebPushDevice, p.FcmDevice, p.ApnsDevice), params=[USER]),
            "get": op("A user's devices with their state", {200: p.Devices}, (401, 403, 422),
                      params=[USER])},
        "/v1/users/{user_id}/devices/{device_id}": {"delete": _gone(
            "Remove a device", [USER, _param("device_id", "path", _STR)], 401, 403, 404, 422)},
        "/v1/users/{user_id}/tokens": {"post": op(
            "A short-lived user token for one user's own inbox and preferences (a producer's "
            "key only)", {201: p.Token}, (400, 401, 403, 408, 422), p.TokenRequest,
            optional=True, params=[USER])},
        "/v1/users/{user_id}/preferences": {
            "get": _tagged(op("The person's preferences, with each category's defaults; ETag: "
                              "their version", {200: Preferences}, (401, 403, 422),
                              params=[USER], **PERSON)),
            "put": _tagged(op(
                "Replace the person's preferences (a new version); with If-Match (or the "
                "body's version), only while it names the current version", {200: Preferences},
                (400, 401, 403, 408, 412, 422), p.PreferencesRequest, params=[USER, IF_MATCH],
                **PERSON)),
            "patch": _tagged(op(
                "Change what a JSON merge patch names of the person's preferences (a new "
                "version); with If-Match, only while it names the current version",
                {200: Preferences}, (400, 401, 403, 408, 412, 422), p.PreferencesPatch,
                params=[USER, IF_MATCH], **PERSON))},
        "/v1/users/{user_id}/names": {"get": op(
            "Every kind's and category's name (title, description) in the person's locale: "
            "what a page shows in place of an identifier", {200: p.Names}, (401, 403, 422),
            params=[USER], **PERSON)},
        "/v1/users/{user_id}/inbox": {"get": op(
            "A page of the inbox, newest first, by a stable (created_at, id) cursor",
            {200: p.InboxPage}, (401, 403, 422), **PERSON, params=[
                USER, TOKEN, _param("before", "query", _STR),
                _param("limit", "query", {**LIMIT, "maximum": 100}),
                _param("archived", "query", {"type": "string", "enum": ["true", "false"]})])},
        "/v1/users/{user_id}/inbox/badge": {"get": op(
            "The unread count (a maintained counter)", {200: p.Badge}, (401, 403, 422),
            params=[USER], **PERSON)},
        "/v1/users/{user_id}/inbox/stream": {"get": _stream(
            "Server-Sent Events: item (id: its seq; resume with Last-Event-ID), badge, read, "
            "archived", [USER, TOKEN, _param("Last-Event-ID", "header", {
                "type": "string", "pattern": "^[0-9]+$"})])},
        "/v1/users/{user_id}/inbox/read-all": {"post": op(
            "Mark every item read (kinds with stop = read are resolved)", {200: p.InboxChange},
            (401, 403, 422), params=[USER], **PERSON)},
        "/v1/users/{user_id}/inbox/{item_id}/read": {"post": op(
            "Mark one item read (a kind with stop = read is resolved)", {200: p.InboxChange},
            (401, 403, 404, 422), params=ITEM, **PERSON)},
        "/v1/users/{user_id}/inbox/{item_id}/archive": {"post": op(
            "Archive one item (out of pages and the badge)", {200: p.InboxChange},
            (401, 403, 404, 422), params=ITEM, **PERSON)},
        "/v1/unsubscribe/{token}": {
            "get": {"summary": "One-click unsubscribe: the confirmation page", "security": [],
                    "parameters": [LINK], "responses": {"200": HTML, "404": HTML}},
            "post": {"summary": "One-click unsubscribe (RFC 8058): the category is off at once",
                     "security": [], "parameters": [LINK], "requestBody": {
                         "required": False, "content": {"application/x-www-form-urlencoded": {
                             "schema": {}}}},
                     "responses": {"200": HTML, "400": HTML, "404": HTML, **_errors(408, 413)}}},
        "/v1/suppressions": {
            "get": op("The tenant's suppression list (and the account-wide one), newest first",
                      {200: p.Suppressions}, (401, 403, 422), params=[
                          _param("address", "query", _STR),
                          _param("limit", "query", {**LIMIT, "maximum": 1000})]),
            "post": op("Stop sending to an address (201; 200 if it already was)",
                       {201: p.Suppression, 200: (p.Suppression, "it already was")},
                       (400, 401, 403, 404, 408, 422), p.SuppressionRequest)},
        "/v1/suppressions/{channel_type}/{address}": {"delete": _gone(
            "Send to an address again (the tenant's own entries only)", [
                _param("channel_type", "path", {"type": "string",
                                                "enum": list(SUPPRESSION_TYPES)}),
                _param("address", "path", _STR)], 401, 403, 404, 422)},
    }


def _events() -> dict[str, Any]:
    e = events
    return {
        "/v1/events": {"post": op(
            "Post an event: one notification per recipient and kind of its type; 202 once the "
            "event and its routing job are committed, fan-out follows",
            {202: e.EventAccepted, 200: (e.EventAccepted, "the same event again")},
            (400, 401, 403, 408, 409, 413, 422, 429, 503), e.EventRequest)},
        "/v1/events/{event_id}": {"get": op(
            "An event: its audience, routing progress and its notifications by state",
            {200: e.Event}, (401, 403, 404, 422), params=[_param("event_id", "path", EventId)])},
        "/v1/topics/{topic}": {
            "put": op("Make a topic (201) or change it", {201: e.Topic, 200: (e.Topic, "changed")},
                      (400, 401, 403, 408, 413, 422), e.TopicRequest, optional=True,
                      params=[TOPIC]),
            "get": op("A topic: its members' count and version", {200: e.Topic},
                      (401, 403, 404, 422), params=[TOPIC]),
            "delete": _gone("Delete a topic that has no members", [TOPIC], 401, 403, 404, 409,
                            422, said="deleted")},
        "/v1/topics/{topic}/members": {
            "post": op("Add and remove members as one change (a new version)", {200: e.Topic},
                       (400, 401, 403, 404, 408, 413, 422), e.MembersRequest, params=[TOPIC]),
            "get": op("Members by user id, a page at a time", {200: e.Members},
                      (401, 403, 404, 422), params=[
                          TOPIC, _param("after", "query", _STR),
                          _param("limit", "query", {**LIMIT, "maximum": 1000})])},
        "/v1/users/{user_id}/topics": {"get": op(
            "The topics a person follows", {200: e.Followed}, (401, 403, 422), params=[USER],
            **FOLLOWER)},
        "/v1/users/{user_id}/topics/{topic}": {
            "put": op("Follow a topic", {200: e.Following}, (401, 403, 404, 422),
                      params=[USER, TOPIC], **FOLLOWER),
            "delete": op("Leave a topic", {200: e.Following}, (401, 403, 404, 422),
                         params=[USER, TOPIC], **FOLLOWER)},
    }


# Every Struct the document names, for msgspec to make their schemas (and those they hold).
SHAPES: list[Any] = [
    common.Error, common.Refused, notifications.AcceptedItem, notifications.ResolvedItem,
    notifications.Decision, notifications.Health, notifications.Ready,
    people.WebPushDevice, people.FcmDevice, people.ApnsDevice, people.User, people.UserPatch,
    UserView, Status, Preferences]


def _shapes(paths: dict[str, Any]) -> list[Any]:
    """SHAPES and every Struct the paths name (by its component name)."""
    named = set(re.findall(r"#/components/schemas/(\w+)", json.dumps(paths)))
    found = {s.__name__: s for s in SHAPES}
    for module in (common, notifications, people, events):
        for name, value in vars(module).items():
            if name in named and isinstance(value, type) and issubclass(value, msgspec.Struct):
                found.setdefault(name, value)
    return list(found.values())


@functools.cache
def _document() -> str:
    """The document as JSON, before the config narrows it (made once)."""
    paths = {**_notifications(), **_users(), **_events()}
    _, schemas = msgspec.json.schema_components(
        _shapes(paths), ref_template="#/components/schemas/{name}")
    schemas["ErrorBody"]["properties"]["code"] = {"type": "string", "enum": sorted(CATALOG)}
    schemas["Error"]["properties"]["error"] = schemas["ErrorBody"]
    return json.dumps({
        "openapi": "3.1.0",
        "info": {"title": "notifyd", "version": __version__},
        "components": {"schemas": schemas, "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}],
        "paths": paths,
    })


def spec(kinds: list[str] | None = None, channels: list[str] | None = None,
         token_ttl_max: int = TOKEN_TTL_MAX,
         max_inline_users: int = FanoutConfig.max_inline_users) -> dict[str, Any]:
    """The document; given the configured kinds and channels, their names are enums in it, a
    token's longest ttl_sec is tokens.max_ttl_sec, and an event's longest list of users
    fanout.max_inline_users."""
    doc: dict[str, Any] = json.loads(_document())
    schemas = doc["components"]["schemas"]
    if kinds is not None:
        schemas["AcceptRequest"]["properties"]["kind"] = {"type": "string",
                                                          "enum": sorted(kinds)}
    if channels is not None:
        schemas["ChainStep"]["properties"]["channel"] = {"type": "string",
                                                         "enum": sorted(channels)}
    schemas["TokenRequest"]["properties"]["ttl_sec"]["maximum"] = token_ttl_max
    schemas["Audience"]["properties"]["user_ids"]["maxItems"] = max_inline_users
    return doc


@functools.lru_cache(maxsize=4)
def encoded(kinds: tuple[str, ...], channels: tuple[str, ...], token_ttl_max: int,
            max_inline_users: int) -> bytes:
    """The document as JSON, made once per config: anyone may ask for it, and making it takes
    milliseconds that a client asking again and again would take from every other request."""
    return msgspec.json.encode(spec(list(kinds), list(channels), token_ttl_max,
                                    max_inline_users))
