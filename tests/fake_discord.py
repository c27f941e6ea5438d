"""Discord's Execute Webhook on 127.0.0.1 (POST /api/webhooks/{id}/{token}), as Discord answers.

It checks the webhook id and token (10015 Unknown Webhook 404, 50027 Invalid Webhook Token 401),
wait=true (without it Discord answers 204 even for a message it does not save: recorded as a
problem), a JSON body with content (1-2000 characters) or embeds (a title up to 256, a
description up to 4096), and 50035 Invalid Form Body (400) otherwise. It answers 200 with the
saved message ({id, channel_id, webhook_id, content, embeds, ...}), or rate limits after
`limit` messages: 429 with {"message": "You are being rate limited.", "retry_after": seconds as
a float, "global": false} and Retry-After / X-RateLimit-* headers, or what a test sets.

Sources: https://discord.com/developers/docs/resources/webhook#execute-webhook,
https://discord.com/developers/docs/topics/rate-limits,
https://discord.com/developers/docs/topics/opcodes-and-status-codes#json.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from channel_support import AppPeer

_ids = itertools.count(1_283_998_120_000_000_000)


def discord_error(status: int, code: int, message: str,
                  headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"message": message, "code": code}, status=status, headers=headers)


@dataclass
class FakeDiscord(AppPeer):
    webhook_id: str
    token: str
    limit: int = 1000  # messages before it rate limits
    retry_after: float = 1.25
    posted: list[dict[str, Any]] = field(default_factory=list)
    queries: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    canned: web.Response | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/webhooks/{self.webhook_id}/{self.token}"

    async def _execute(self, request: web.Request) -> web.StreamResponse:
        self.queries.append(request.query_string)
        if request.match_info["id"] != self.webhook_id:
            return discord_error(404, 10015, "Unknown Webhook")
        if request.match_info["token"] != self.token:
            return discord_error(401, 50027, "Invalid Webhook Token")
        if self.canned is not None:
            return self.canned
        if len(self.posted) >= self.limit:
            wait = self.retry_after
            return web.json_response(
                {"message": "You are being rate limited.", "retry_after": wait, "global": False},
                status=429, headers={"Retry-After": str(int(wait) + 1),
                                     "X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0",
                                     "X-RateLimit-Reset-After": str(wait),
                                     "X-RateLimit-Scope": "user"})
        body = json.loads(await request.read())
        if not _valid(body):
            return web.json_response({"code": 50035, "message": "Invalid Form Body", "errors": {
                "content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH",
                                         "message": "Must be 2000 or fewer in length."}]}}},
                                     status=400)
        if request.query.get("wait") != "true":
            self.problems.append("no wait=true: a message Discord does not save answers 204")
            return web.Response(status=204)
        self.posted.append(body)
        return web.json_response({"id": str(next(_ids)), "type": 0, "channel_id": "112233",
                                  "webhook_id": self.webhook_id,
                                  "content": body.get("content", ""),
                                  "embeds": body.get("embeds", []),
                                  "author": {"id": self.webhook_id, "bot": True,
                                             "username": body.get("username", "notifyd")}})

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/api/webhooks/{id}/{token}", self._execute)


def _valid(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    content, embeds = body.get("content"), body.get("embeds")
    if content is None and not embeds:
        return False
    if content is not None and not (isinstance(content, str) and 0 < len(content) <= 2000):
        return False
    for embed in embeds or []:
        if len(embed.get("title", "")) > 256 or len(embed.get("description", "")) > 4096:
            return False
    return True
