"""The client on the standard library (urllib): one connection per call, nothing to install.

    from notifyd.client import Client, NotifydError

    api = Client("http://127.0.0.1:7726", key)
    accepted = api.post("ada", "invoice_due", {"invoice": "1009"}, dedup_key="invoice-1009")
    api.resolve_key("ada", "invoice-1009", "paid")

A user token in place of the key reads and changes that user's own inbox and preferences.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Unpack, cast

from notifyd.client import calls
from notifyd.client.calls import STREAM_READ_SEC, Call, Event, EventReader, NotifydError
from notifyd.client.types import (
    Accepted,
    Device,
    InboxChange,
    InboxPage,
    ItemResult,
    Names,
    NotificationIn,
    NotificationOptions,
    Preferences,
    Profile,
    ResolutionIn,
    Resolved,
    Status,
    Token,
    UserView,
)


class Client:
    """notifyd's API from Python: each method one call; a refusal raises NotifydError with the
    API's code, message and field. `credential` is an API key or a user token."""

    def __init__(self, base_url: str, credential: str, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.credential = credential
        self.timeout = timeout

    def _open(self, call: Call, timeout: float) -> Any:
        request = urllib.request.Request(self.base_url + call.target(), data=call.data(),
                                         method=call.method,
                                         headers=calls.headers(self.credential, call))
        try:
            return urllib.request.urlopen(request, timeout=timeout)
        except urllib.error.HTTPError as e:
            with e:
                raise NotifydError.of(e.code, e.read(), e.headers.get("Retry-After")) from None
        except (urllib.error.URLError, OSError) as e:
            raise NotifydError.unreachable(self.base_url, getattr(e, "reason", e)) from None

    def _run(self, call: Call) -> Any:
        with self._open(call, self.timeout) as answer:
            try:
                body = answer.read()
            except (OSError, http.client.HTTPException) as e:  # cut short, or too slow
                raise NotifydError.unreachable(self.base_url, e) from None
            return Call.answer(answer.status, body, answer.headers.get("Retry-After"))

    def _events(self, call: Call) -> Iterator[Event]:
        reader = EventReader()
        with self._open(call, STREAM_READ_SEC) as answer:
            try:
                for raw in answer:
                    event = reader.line(raw)
                    if event is not None:
                        yield event
            except (OSError, http.client.HTTPException) as e:  # the daemon went away mid-stream
                raise NotifydError.unreachable(self.base_url, e) from None

    # --- a producer's calls (an API key) -----------------------------------------------------

    def post(self, user_id: str, kind: str, params: Mapping[str, Any] | None = None,
             **options: Unpack[NotificationOptions]) -> Accepted:
        return cast(Accepted, self._run(calls.post(user_id, kind, params, options)))

    def post_batch(self, items: Iterable[NotificationIn]) -> list[ItemResult]:
        return cast(list[ItemResult], self._run(calls.post_batch(items))["results"])

    def status(self, notification_id: str) -> Status:
        return cast(Status, self._run(calls.status(notification_id)))

    def resolve(self, notification_id: str, resolution: str | None = None) -> Resolved:
        return cast(Resolved, self._run(calls.resolve(notification_id, resolution)))

    def resolve_key(self, user_id: str, dedup_key: str,
                    resolution: str | None = None) -> Resolved:
        return cast(Resolved, self._run(calls.resolve_key(user_id, dedup_key, resolution)))

    def resolve_batch(self, items: Iterable[ResolutionIn]) -> list[ItemResult]:
        return cast(list[ItemResult], self._run(calls.resolve_batch(items))["results"])

    def put_user(self, user_id: str, **profile: Unpack[Profile]) -> UserView:
        return cast(UserView, self._run(calls.put_user(user_id, profile)))

    def get_user(self, user_id: str) -> UserView:
        return cast(UserView, self._run(calls.get_user(user_id)))

    def add_device(self, user_id: str, subscription: Mapping[str, Any]) -> Device:
        return cast(Device, self._run(calls.add_device(user_id, subscription)))

    def devices(self, user_id: str) -> list[Device]:
        return cast(list[Device], self._run(calls.devices(user_id))["devices"])

    def remove_device(self, user_id: str, device_id: str) -> None:
        self._run(calls.remove_device(user_id, device_id))

    def user_token(self, user_id: str, ttl_sec: int | None = None) -> Token:
        return cast(Token, self._run(calls.user_token(user_id, ttl_sec)))

    def decisions(self, kind: str | None = None, channel: str | None = None,
                  user_id: str | None = None) -> Iterator[Event]:
        """The engine's decisions as they happen (a key with the read scope): events named
        "decision" (data: at, decision, notification_id, step_no, channel, kind, user_id,
        reason) and "lost" ({count}: dropped while this reader was slow). Endless."""
        return self._events(calls.decisions(kind, channel, user_id))

    # --- a person's calls (an API key, or that user's token) ---------------------------------

    def preferences(self, user_id: str) -> Preferences:
        return cast(Preferences, self._run(calls.preferences(user_id)))

    def names(self, user_id: str) -> Names:
        """Every kind's and category's name in the person's locale, for a page to show."""
        return cast(Names, self._run(calls.names(user_id)))

    def set_preferences(self, user_id: str, opt_out: bool | None = None,
                        categories: Mapping[str, Mapping[str, bool]] | None = None
                        ) -> Preferences:
        return cast(Preferences, self._run(calls.set_preferences(user_id, opt_out,
                                                                 categories)))

    def inbox(self, user_id: str, limit: int | None = None, before: str | None = None,
              archived: bool = False) -> InboxPage:
        return cast(InboxPage, self._run(calls.inbox(user_id, limit, before, archived)))

    def badge(self, user_id: str) -> int:
        return int(self._run(calls.badge(user_id))["unread"])

    def read(self, user_id: str, item_id: str) -> InboxChange:
        return cast(InboxChange, self._run(calls.read(user_id, item_id)))

    def read_all(self, user_id: str) -> InboxChange:
        return cast(InboxChange, self._run(calls.read_all(user_id)))

    def archive(self, user_id: str, item_id: str) -> InboxChange:
        return cast(InboxChange, self._run(calls.archive(user_id, item_id)))

    def inbox_events(self, user_id: str) -> Iterator[Event]:
        """The inbox as it changes: "item" (id: its seq), "badge", "read", "archived"."""
        return self._events(calls.inbox_events(user_id))
