"""The client on aiohttp, for asyncio code: the same methods as `Client`, awaited, over one
session with keep-alive connections.

    async with AsyncClient("http://127.0.0.1:7726", key) as api:
        accepted = await api.post("ada", "invoice_due", {"invoice": "1009"})
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import Any, Unpack, cast

import aiohttp

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


class AsyncClient:
    """`Client`'s calls for asyncio; close it (or use `async with`) when done."""

    def __init__(self, base_url: str, credential: str, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.credential = credential
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _request(self, call: Call, timeout: aiohttp.ClientTimeout) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session.request(call.method, self.base_url + call.target(),
                                     data=call.data(), timeout=timeout,
                                     headers=calls.headers(self.credential, call))

    async def _run(self, call: Call) -> Any:
        try:
            async with self._request(call, aiohttp.ClientTimeout(total=self.timeout)) as answer:
                body = await answer.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            raise NotifydError.unreachable(self.base_url, type(e).__name__) from None
        return Call.answer(answer.status, body, answer.headers.get("Retry-After"))

    async def _events(self, call: Call) -> AsyncIterator[Event]:
        reader = EventReader()
        timeout = aiohttp.ClientTimeout(total=None, sock_read=STREAM_READ_SEC)
        try:
            async with self._request(call, timeout) as answer:
                if answer.status != 200:
                    Call.answer(answer.status, await answer.read(),
                                answer.headers.get("Retry-After"))
                async for raw in answer.content:
                    event = reader.line(raw)
                    if event is not None:
                        yield event
        except (aiohttp.ClientError, TimeoutError) as e:
            raise NotifydError.unreachable(self.base_url, type(e).__name__) from None

    # --- a producer's calls (an API key) -----------------------------------------------------

    async def post(self, user_id: str, kind: str, params: Mapping[str, Any] | None = None,
                   **options: Unpack[NotificationOptions]) -> Accepted:
        return cast(Accepted, await self._run(calls.post(user_id, kind, params, options)))

    async def post_batch(self, items: Iterable[NotificationIn]) -> list[ItemResult]:
        return cast(list[ItemResult], (await self._run(calls.post_batch(items)))["results"])

    async def status(self, notification_id: str) -> Status:
        return cast(Status, await self._run(calls.status(notification_id)))

    async def resolve(self, notification_id: str, resolution: str | None = None) -> Resolved:
        return cast(Resolved, await self._run(calls.resolve(notification_id, resolution)))

    async def resolve_key(self, user_id: str, dedup_key: str,
                          resolution: str | None = None) -> Resolved:
        return cast(Resolved, await self._run(calls.resolve_key(user_id, dedup_key,
                                                                resolution)))

    async def resolve_batch(self, items: Iterable[ResolutionIn]) -> list[ItemResult]:
        return cast(list[ItemResult], (await self._run(calls.resolve_batch(items)))["results"])

    async def put_user(self, user_id: str, **profile: Unpack[Profile]) -> UserView:
        return cast(UserView, await self._run(calls.put_user(user_id, profile)))

    async def get_user(self, user_id: str) -> UserView:
        return cast(UserView, await self._run(calls.get_user(user_id)))

    async def add_device(self, user_id: str, subscription: Mapping[str, Any]) -> Device:
        return cast(Device, await self._run(calls.add_device(user_id, subscription)))

    async def devices(self, user_id: str) -> list[Device]:
        return cast(list[Device], (await self._run(calls.devices(user_id)))["devices"])

    async def remove_device(self, user_id: str, device_id: str) -> None:
        await self._run(calls.remove_device(user_id, device_id))

    async def user_token(self, user_id: str, ttl_sec: int | None = None) -> Token:
        return cast(Token, await self._run(calls.user_token(user_id, ttl_sec)))

    def decisions(self, kind: str | None = None, channel: str | None = None,
                  user_id: str | None = None) -> AsyncIterator[Event]:
        """As Client.decisions: `async for event in api.decisions(kind="invoice_due")`."""
        return self._events(calls.decisions(kind, channel, user_id))

    # --- a person's calls (an API key, or that user's token) ---------------------------------

    async def preferences(self, user_id: str) -> Preferences:
        return cast(Preferences, await self._run(calls.preferences(user_id)))

    async def names(self, user_id: str) -> Names:
        """Every kind's and category's name in the person's locale, for a page to show."""
        return cast(Names, await self._run(calls.names(user_id)))

    async def set_preferences(self, user_id: str, opt_out: bool | None = None,
                              categories: Mapping[str, Mapping[str, bool]] | None = None
                              ) -> Preferences:
        return cast(Preferences, await self._run(calls.set_preferences(user_id, opt_out,
                                                                       categories)))

    async def inbox(self, user_id: str, limit: int | None = None, before: str | None = None,
                    archived: bool = False) -> InboxPage:
        return cast(InboxPage, await self._run(calls.inbox(user_id, limit, before, archived)))

    async def badge(self, user_id: str) -> int:
        return int((await self._run(calls.badge(user_id)))["unread"])

    async def read(self, user_id: str, item_id: str) -> InboxChange:
        return cast(InboxChange, await self._run(calls.read(user_id, item_id)))

    async def read_all(self, user_id: str) -> InboxChange:
        return cast(InboxChange, await self._run(calls.read_all(user_id)))

    async def archive(self, user_id: str, item_id: str) -> InboxChange:
        return cast(InboxChange, await self._run(calls.archive(user_id, item_id)))

    def inbox_events(self, user_id: str) -> AsyncIterator[Event]:
        """As Client.inbox_events."""
        return self._events(calls.inbox_events(user_id))
