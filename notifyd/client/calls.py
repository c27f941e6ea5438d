"""Each API call as data, written once for both clients: its method, path, query and body
(`Call`), how an answer becomes a value or a `NotifydError`, the Server-Sent Events reader, and
a user token signed with the tenant's key, as a producer's backend makes one.

Nothing here touches the network: sync.py sends a Call with the standard library, aio.py with
aiohttp.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple
from urllib.parse import quote, urlencode

from notifyd.domain import signed

STREAM_READ_SEC = 60.0  # a stream says something at least every 25 s (a keepalive)


class Event(NamedTuple):
    """One Server-Sent Event: its name ("decision", "lost"; "item", "badge", ...), its data
    read as JSON, and its id (an inbox item's seq) if it has one."""

    name: str
    data: dict[str, Any]
    id: str | None = None


class NotifydError(Exception):
    """A call notifyd refused, or could not answer: the API's error code, message and the
    field it names, with the HTTP status (None: notifyd was not reached) and, for 503, how
    long to wait before trying again."""

    def __init__(self, status: int | None, code: str, message: str, field: str | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{code}: {message}" + (f" ({field})" if field else ""))
        self.status, self.code, self.message, self.field = status, code, message, field
        self.retry_after = retry_after

    @classmethod
    def of(cls, status: int, body: bytes, retry_after: str | None) -> NotifydError:
        """The error an answer carries ({"error": {code, message, field}}), or one that names
        the status when the body is not that (a proxy's page, say)."""
        try:
            error = json.loads(body)["error"]
            code, message, field = str(error["code"]), str(error["message"]), error.get("field")
        except (ValueError, KeyError, TypeError):
            code, message, field = f"http_{status}", body[:200].decode(errors="replace"), None
        wait = float(retry_after) if retry_after and retry_after.isdigit() else None
        return cls(status, code, message, field, wait)

    @classmethod
    def unreachable(cls, base_url: str, why: object) -> NotifydError:
        return cls(None, "unreachable", f"cannot reach notifyd at {base_url}: {why}")


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: Any = None
    query: Mapping[str, str] | None = None

    def target(self) -> str:
        picked = {k: v for k, v in (self.query or {}).items() if v is not None}
        return self.path + (f"?{urlencode(picked)}" if picked else "")

    def data(self) -> bytes | None:
        return None if self.body is None else json.dumps(self.body).encode()

    @staticmethod
    def answer(status: int, body: bytes, retry_after: str | None) -> Any:
        """The answer's JSON (None for 204), or NotifydError."""
        if not 200 <= status < 300:
            raise NotifydError.of(status, body, retry_after)
        return json.loads(body) if body else None


def headers(credential: str, call: Call | None = None) -> dict[str, str]:
    """An API key or a user token, as the bearer; JSON when there is a body."""
    sent = {"Authorization": f"Bearer {credential}", "Accept": "application/json"}
    if call is not None and call.body is not None:
        sent["Content-Type"] = "application/json"
    return sent


def _user(user_id: str, tail: str = "") -> str:
    return f"/v1/users/{quote(user_id, safe='')}{tail}"


def _some(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


# --- the calls -------------------------------------------------------------------------------


def post(user_id: str, kind: str, params: Mapping[str, Any] | None,
         options: Mapping[str, Any]) -> Call:
    return Call("POST", "/v1/notifications", {"user_id": user_id, "kind": kind,
                                              "params": dict(params or {}), **options})


def post_batch(items: Iterable[Mapping[str, Any]]) -> Call:
    return Call("POST", "/v1/notifications/batch", {"items": [dict(i) for i in items]})


def status(notification_id: str) -> Call:
    return Call("GET", f"/v1/notifications/{quote(notification_id, safe='')}")


def resolve(notification_id: str, resolution: str | None) -> Call:
    return Call("POST", f"/v1/notifications/{quote(notification_id, safe='')}/resolve",
                _some(resolution=resolution))


def resolve_key(user_id: str, dedup_key: str, resolution: str | None) -> Call:
    return Call("POST", "/v1/resolutions",
                _some(user_id=user_id, dedup_key=dedup_key, resolution=resolution))


def resolve_batch(items: Iterable[Mapping[str, Any]]) -> Call:
    return Call("POST", "/v1/resolutions/batch", {"items": [dict(i) for i in items]})


def put_user(user_id: str, profile: Mapping[str, Any]) -> Call:
    return Call("PUT", _user(user_id), dict(profile))


def get_user(user_id: str) -> Call:
    return Call("GET", _user(user_id))


def add_device(user_id: str, subscription: Mapping[str, Any]) -> Call:
    return Call("POST", _user(user_id, "/devices"), dict(subscription))


def devices(user_id: str) -> Call:
    return Call("GET", _user(user_id, "/devices"))


def remove_device(user_id: str, device_id: str) -> Call:
    return Call("DELETE", _user(user_id, f"/devices/{quote(device_id, safe='')}"))


def user_token(user_id: str, ttl_sec: int | None) -> Call:
    return Call("POST", _user(user_id, "/tokens"), _some(ttl_sec=ttl_sec))


def preferences(user_id: str) -> Call:
    return Call("GET", _user(user_id, "/preferences"))


def names(user_id: str) -> Call:
    return Call("GET", _user(user_id, "/names"))


def set_preferences(user_id: str, opt_out: bool | None,
                    categories: Mapping[str, Mapping[str, bool]] | None) -> Call:
    return Call("PUT", _user(user_id, "/preferences"), _some(
        opt_out=opt_out, categories=None if categories is None else {
            name: dict(media) for name, media in categories.items()}))


def inbox(user_id: str, limit: int | None, before: str | None, archived: bool) -> Call:
    return Call("GET", _user(user_id, "/inbox"), query=_some(
        limit=None if limit is None else str(limit), before=before,
        archived="true" if archived else None))


def badge(user_id: str) -> Call:
    return Call("GET", _user(user_id, "/inbox/badge"))


def read(user_id: str, item_id: str) -> Call:
    return Call("POST", _user(user_id, f"/inbox/{quote(item_id, safe='')}/read"))


def read_all(user_id: str) -> Call:
    return Call("POST", _user(user_id, "/inbox/read-all"))


def archive(user_id: str, item_id: str) -> Call:
    return Call("POST", _user(user_id, f"/inbox/{quote(item_id, safe='')}/archive"))


def inbox_events(user_id: str) -> Call:
    return Call("GET", _user(user_id, "/inbox/stream"))


def decisions(kind: str | None, channel: str | None, user_id: str | None) -> Call:
    return Call("GET", "/v1/decisions/stream",
                query=_some(kind=kind, channel=channel, user_id=user_id))


# --- streams and tokens ----------------------------------------------------------------------


class EventReader:
    """Server-Sent Events, line by line: `line` returns an Event when a blank line ends one.
    Comments (keepalives) and `retry:` are skipped."""

    def __init__(self) -> None:
        self.name, self.data = "message", ""
        self.id: str | None = None

    def line(self, raw: bytes | str) -> Event | None:
        text = (raw.decode() if isinstance(raw, bytes) else raw).rstrip("\r\n")
        if text:
            field, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                self.name = value
            elif field == "data":
                self.data += value
            elif field == "id":
                self.id = value
            return None
        if not self.data:
            self.name = "message"
            return None
        event = Event(self.name, json.loads(self.data), self.id)
        self.name, self.data, self.id = "message", "", None
        return event


def sign_user_token(secret: str, tenant: str, user_id: str, ttl_sec: int = 3600,
                    now: float | None = None) -> str:
    """A user token for one user's own inbox and preferences, signed with the tenant's key as
    `notifyd tokens secret` prints it (base64url): what a producer's backend hands a page,
    without a call to notifyd. It lives `ttl_sec` (at most tokens.max_ttl_sec)."""
    key = base64.urlsafe_b64decode(secret + "=" * (-len(secret) % 4))
    expires = int(time.time() if now is None else now) + ttl_sec
    return signed.make_user_token(key, tenant, user_id, expires)
