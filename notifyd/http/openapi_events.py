"""The OpenAPI description of events and topics (http/events.py, http/topics.py), merged into
the document by http/openapi.spec."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from notifyd.domain.events import EVENT_ID_RE, MAX_SUBJECT, STATES, TOPIC_RE
from notifyd.domain.topics import MAX_CHANGE
from notifyd.domain.validate import MAX_ID_LEN

_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
_TIME = {"type": ["string", "null"], "format": "date-time"}
_INT = {"type": "integer", "minimum": 0}
_USER = {"type": "string", "minLength": 1, "maxLength": MAX_ID_LEN}
_TOPIC = {"type": "string", "pattern": TOPIC_RE.pattern}
_EVENT_ID = {"type": "string", "pattern": EVENT_ID_RE.pattern}


def _users(most: int) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "maxItems": most, "items": _USER}


def schemas(max_inline_users: int) -> dict[str, Any]:
    return {
        "EventRequest": {
            "type": "object", "required": ["event_id", "type", "audience"],
            "additionalProperties": False, "properties": {
                "event_id": {**_EVENT_ID, "description": "the producer's id: the same input "
                                                         "again is answered with the event"},
                "type": {**_STR, "description": "an [events.TYPE] of the config"},
                "audience": {"oneOf": [
                    {"type": "object", "required": ["user_ids"], "additionalProperties": False,
                     "description": "a list (needs the post scope)",
                     "properties": {"user_ids": _users(max_inline_users)}},
                    {"type": "object", "required": ["topic"], "additionalProperties": False,
                     "description": "a topic's members now (needs the topics scope)",
                     "properties": {"topic": _TOPIC}},
                    {"type": "object", "required": ["everyone"], "additionalProperties": False,
                     "description": "every user of the tenant now (needs the everyone scope)",
                     "properties": {"everyone": {"type": "boolean", "enum": [True]}}}]},
                "params": {"type": "object"},
                "subject": {"type": ["string", "null"], "minLength": 1,
                            "maxLength": MAX_SUBJECT,
                            "description": "what it is about, e.g. thread:42"},
                "send_at": {"type": ["string", "null"], "format": "date-time",
                            "description": "RFC 3339: the ladders of the notifications it makes "
                            "start then (routing starts at once); as for one notification, at "
                            "most server.max_schedule_sec ahead, refused for a type with an "
                            "inbox kind"}}},
        "EventAccepted": {"type": "object", "required": [
            "event_id", "state", "created", "audience_size", "routed"], "properties": {
            "event_id": _STR, "state": {"type": "string", "enum": ["routing", "routed"]},
            "created": {"type": "boolean"}, "audience_size": _INT, "routed": _INT}},
        "Event": {"type": "object", "required": [
            "event_id", "type", "subject", "kinds", "audience", "audience_size", "routed",
            "state", "accepted_at", "routed_at", "fanout_lag_ms", "notifications"],
            "properties": {
            "event_id": _STR, "type": _STR, "subject": _NSTR, "params": {"type": "object"},
            "kinds": {"type": "array", "items": _STR},
            "audience": {"type": "object", "required": ["kind"], "properties": {
                "kind": {"type": "string", "enum": ["user_ids", "topic", "everyone"]},
                "topic": _STR, "version": {**_INT, "description": "the membership version "
                                                                  "it pinned"},
                "cutoff": {**_TIME, "description": "recipients made before it"}}},
            "audience_size": {**_INT, "description": "recipients, counted at acceptance"},
            "routed": {**_INT, "description": "recipients routed so far"},
            "state": {"type": "string", "enum": ["routing", "routed"]},
            "accepted_at": _TIME, "routed_at": _TIME,
            "send_at": {**_TIME, "description": "when its notifications' ladders start, if "
                        "scheduled"},
            "fanout_lag_ms": {**_INT, "description": "now - accepted_at while routing; "
                                                     "routed_at - accepted_at after"},
            "notifications": {"type": "object", "description": "its notifications (one per "
                              "recipient and kind) by how they stand", "required": [
                                  *STATES, "suppressed"], "properties": {
                **dict.fromkeys(STATES, _INT),
                "suppressed": {"type": "object", "additionalProperties": _INT,
                               "description": "by reason: preference, opted_out, "
                                              "no_contact, suppression_list, ..."}}}}},
        "TopicRequest": {"type": "object", "additionalProperties": False, "properties": {
            "self_service": {"type": ["boolean", "null"], "description": "people may follow "
                             "and leave it with their own user token"}}},
        "Topic": {"type": "object", "required": [
            "topic", "self_service", "members", "version", "created_at"], "properties": {
            "topic": _STR, "self_service": {"type": "boolean"}, "members": _INT,
            "version": {**_INT, "description": "bumped by each change of its members"},
            "created_at": _TIME, "updated_at": _TIME,
            "added": _INT, "removed": _INT}},
        "MembersRequest": {"type": "object", "additionalProperties": False, "properties": {
            "add": {**_users(MAX_CHANGE), "type": ["array", "null"]},
            "remove": {**_users(MAX_CHANGE), "type": ["array", "null"]}}},
        "Members": {"type": "object", "required": ["members", "next"], "properties": {
            "members": {"type": "array", "items": {"type": "object", "required": [
                "user_id", "since"], "properties": {"user_id": _STR, "since": _TIME}}},
            "next": {"type": ["string", "null"], "description": "the after= of the next "
                                                                "page"}}},
        "Following": {"type": "object", "required": ["topic", "following", "changed",
                                                     "version"], "properties": {
            "topic": _STR, "following": {"type": "boolean"}, "changed": {"type": "boolean"},
            "version": _INT}},
        "Followed": {"type": "object", "required": ["topics"], "properties": {
            "topics": {"type": "array", "items": {"type": "object", "required": [
                "topic", "self_service", "since"], "properties": {
                "topic": _STR, "self_service": {"type": "boolean"}, "since": _TIME}}}}},
    }


Op = Callable[..., dict[str, Any]]


def paths(op: Op, errors: Callable[..., dict[str, Any]],
          json: Callable[[dict[str, Any], str], dict[str, Any]],
          ref: Callable[[str], dict[str, str]]) -> dict[str, Any]:
    """The paths, built with the document's own helpers (openapi._op, _errors, _json, _ref)."""
    topic = [{"name": "topic", "in": "path", "required": True, "schema": _TOPIC}]
    user = [{"name": "user_id", "in": "path", "required": True, "schema": _USER}]
    post = op("Post an event: one notification per recipient and kind of its type; 202 once "
              "the event and its routing job are committed, fan-out follows", "202",
              "EventAccepted", (400, 401, 403, 408, 409, 413, 422, 503), "EventRequest")
    post["responses"]["200"] = json(ref("EventAccepted"), "the same event again")
    put = {**op("Make a topic (201) or change it", "201", "Topic",
                (400, 401, 403, 408, 413, 422), "TopicRequest"), "parameters": topic}
    put["responses"]["200"] = json(ref("Topic"), "changed")
    person = "Authorization: Bearer <API key with the topics scope> or Bearer <that user's " \
             "user token> (self-service topics only)"
    return {
        "/v1/events": {"post": post},
        "/v1/events/{event_id}": {"get": {
            **op("An event: its audience, routing progress and its notifications by state",
                 "200", "Event", (401, 403, 404, 422)),
            "parameters": [{"name": "event_id", "in": "path", "required": True,
                            "schema": _EVENT_ID}]}},
        "/v1/topics/{topic}": {
            "put": put,
            "get": {**op("A topic: its members' count and version", "200", "Topic",
                         (401, 403, 404, 422)), "parameters": topic},
            "delete": {"summary": "Delete a topic that has no members", "parameters": topic,
                       "responses": {"204": {"description": "deleted"},
                                     **errors(401, 403, 404, 409, 422)}}},
        "/v1/topics/{topic}/members": {
            "post": {**op("Add and remove members as one change (a new version)", "200",
                          "Topic", (400, 401, 403, 404, 408, 413, 422), "MembersRequest"),
                     "parameters": topic},
            "get": {**op("Members by user id, a page at a time", "200", "Members",
                         (401, 403, 404, 422)), "parameters": [
                *topic, {"name": "after", "in": "query", "required": False, "schema": _STR},
                {"name": "limit", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}]}},
        "/v1/users/{user_id}/topics": {"get": {
            **op("The topics a person follows", "200", "Followed", (401, 403, 422)),
            "parameters": user, "description": person}},
        "/v1/users/{user_id}/topics/{topic}": {
            "put": {**op("Follow a topic", "200", "Following", (401, 403, 404, 422)),
                    "parameters": [*user, *topic], "description": person},
            "delete": {**op("Leave a topic", "200", "Following", (401, 403, 404, 422)),
                       "parameters": [*user, *topic], "description": person}},
    }
