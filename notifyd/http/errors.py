"""The one catalog of API errors: every error a client can see has a stable code and status
here. The rules raise DomainError with a code; this face answers it with the code's status."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.errors import DomainError
from notifyd.shapes.common import Error, ErrorBody


@dataclass(frozen=True)
class ErrorSpec:
    status: int
    message: str


CATALOG: dict[str, ErrorSpec] = {
    "invalid_request": ErrorSpec(400, "the request could not be parsed as HTTP"),
    "invalid_json": ErrorSpec(400, "the request body is not valid JSON"),
    "body_not_object": ErrorSpec(400, "the request body must be a JSON object"),
    "unauthorized": ErrorSpec(401, "missing or unknown API key (Authorization: Bearer <key>)"),
    "bad_signature": ErrorSpec(401, "the webhook's signature or credentials did not verify; "
                                    "nothing was stored"),
    "kind_not_allowed": ErrorSpec(403, "this API key may not post this kind"),
    "wrong_user": ErrorSpec(403, "this user token is for another user"),
    "scope_not_allowed": ErrorSpec(403, "this API key's scopes do not allow this call"),
    "not_self_service": ErrorSpec(403, "a person may follow or leave only a self-service topic "
                                       "themselves"),
    "origin_not_allowed": ErrorSpec(403, "no tenant lists this page's origin in its "
                                         "cors_origins"),
    "csrf_failed": ErrorSpec(403, "the form's CSRF token is missing or not this session's; "
                                  "reload the page and try again"),
    "not_found": ErrorSpec(404, "no such resource"),
    "method_not_allowed": ErrorSpec(405, "this method is not allowed on this path"),
    "dedup_conflict": ErrorSpec(
        409, "this dedup key was already used with different input"
    ),
    "event_conflict": ErrorSpec(409, "this event id was already used with different input"),
    "topic_not_empty": ErrorSpec(409, "a topic with members cannot be deleted; remove them "
                                      "first"),
    "precondition_failed": ErrorSpec(412, "the version named (If-Match, or the document's "
                                          "version) is no longer current; read it again and "
                                          "redo the change"),
    "request_timeout": ErrorSpec(408, "the request body did not arrive within "
                                      "server.body_timeout_sec"),
    "body_too_large": ErrorSpec(413, "the request body is larger than server.max_body_bytes"),
    "bad_receipt": ErrorSpec(400, "the webhook verified but its body is not one notifyd can "
                                  "read; nothing was stored"),
    "missing_field": ErrorSpec(422, "a required field is missing"),
    "invalid_field": ErrorSpec(422, "a field has the wrong type or value"),
    "unknown_field": ErrorSpec(422, "the body has a field this endpoint does not know"),
    "unknown_kind": ErrorSpec(422, "no kind of this name is configured"),
    "unknown_channel": ErrorSpec(422, "no channel of this name is configured"),
    "unknown_event_type": ErrorSpec(422, "no event type of this name is configured"),
    "unknown_topic": ErrorSpec(422, "the event names a topic that does not exist"),
    "override_not_allowed": ErrorSpec(422, "this kind does not allow fallback_chain overrides"),
    "too_many_sign_ins": ErrorSpec(429, "too many failed sign-ins from this address; wait a "
                                        "minute"),
    "quota_exceeded": ErrorSpec(429, "this tenant posted past one of its quotas ([quotas]); "
                                     "retry after Retry-After (nothing was accepted)"),
    "too_many_streams": ErrorSpec(429, "this tenant holds its share of the open streams "
                                       "(quotas.stream_share); close one, or retry after "
                                       "Retry-After"),
    "shutting_down": ErrorSpec(503, "notifyd is shutting down; retry against another instance"),
    "overloaded": ErrorSpec(503, "too many requests are waiting; retry after Retry-After with "
                                 "the same dedup key (nothing was accepted)"),
    "storage_unavailable": ErrorSpec(503, "the database cannot take writes now; retry after "
                                          "Retry-After (nothing was accepted)"),
    "too_many_connections": ErrorSpec(503, "every place for connections without an API key "
                                           "is taken; retry after Retry-After"),
    "provider_unreachable": ErrorSpec(503, "verifying the webhook needs a file from the provider "
                                           "that could not be fetched; retry later (nothing was "
                                           "stored)"),
    "internal": ErrorSpec(500, "internal error; nothing was accepted"),
}


class ApiError(DomainError):
    """An error only the HTTP face knows of (a key, a body's size, a route): the catalog's
    message unless one is given."""

    def __init__(self, code: str, message: str | None = None, field: str | None = None) -> None:
        super().__init__(code, message or CATALOG[code].message, field)


def status_of(e: DomainError) -> int:
    return CATALOG[e.code].status


def body_of(e: DomainError) -> Error:
    """{error: {code, message, field}}, as every error is answered."""
    return Error(error=ErrorBody(code=e.code, message=e.message, field=e.field))


def table() -> str:
    """The docs' list of error codes (docs/api.md), from the catalog, by status then code; a test
    holds the two together."""
    rows = ["| code | status | what it means |", "| --- | --- | --- |"]
    for code, spec in sorted(CATALOG.items(), key=lambda item: (item[1].status, item[0])):
        rows.append(f"| `{code}` | {spec.status} | {spec.message} |")
    return "\n".join(rows) + "\n"
