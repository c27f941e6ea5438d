"""The teams channel: a chat step posted to Microsoft Teams as an Adaptive Card, through a
Workflows (Power Automate) webhook, or a legacy incoming webhook while those last.

POST {webhook_url} with {"type": "message", "attachments": [{"contentType":
"application/vnd.microsoft.card.adaptive", "contentUrl": null, "content": <AdaptiveCard>}]}, the
card a TextBlock heading (the chat.title template, if the kind has one) over a wrapping TextBlock
of the text. A workflow answers 202 Accepted when its trigger took the request (the run then
posts the card); a legacy connector answers 200. Sources:
https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using
(Workflows take Adaptive Cards only, in that message envelope; connectors are retiring),
https://learn.microsoft.com/en-us/connectors/teams/#microsoft-teams-webhook (the "When a Teams
webhook request is received" trigger), https://adaptivecards.io/explorer/TextBlock.html and
https://adaptivecards.io/explorer/AdaptiveCard.html (type, version, body, $schema). Not
confirmed from a primary source: the error bodies of the workflow endpoint (Logic Apps style
{"error": {"code", "message"}}); only the status and a short code are read.

Outcomes: 2xx Sent (the run id from x-ms-workflow-run-id, when given). 429 and 5xx Failed, retried
with Retry-After. 400 (the card), 401, 403 and 404 (a wrong sig, a deleted or turned off
workflow) Failed final: retrying the same request changes nothing until the config does. The
webhook is the channel's, not a person's: nothing is Rejected, nothing disabled. Refused
connections Failed; timeouts and connections lost after sending Unknown; Teams takes no
idempotency key, so a retry after Unknown may post twice. The URL's sig is a secret: no reason,
log line or destination holds the URL.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rendered,
    RenderInput,
    Sent,
    chat_text,
)
from notifyd.channels.http import parse_json, parse_retry_after, post, provider_code
from notifyd.channels.types.teams import TYPE as TYPE
from notifyd.channels.types.teams import TeamsSettings
from notifyd.channels.wire import Client

CARD = "application/vnd.microsoft.card.adaptive"
SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
MAX_TEXT = 20_000  # a Teams message is at most about 28 KB; a card of more is refused
RUN_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,128}")


class TeamsChannel:
    def __init__(self, name: str, settings: TeamsSettings, limits: Limits) -> None:
        self.name = name
        self.settings = settings
        self.destination = f"teams webhook {urlsplit(settings.webhook_url).hostname or ''}"
        self.http = Client(limits.max_connections, limits.timeout_sec, limits.egress)

    def __repr__(self) -> str:  # the URL holds the sig
        return f"TeamsChannel({self.name!r})"

    def render(self, step: RenderInput) -> Rendered:
        text, title = chat_text(step, MAX_TEXT)
        body: list[dict[str, Any]] = []
        if title is not None:
            body.append({"type": "TextBlock", "text": title, "weight": "Bolder",
                         "size": "Medium", "wrap": True})
        body.append({"type": "TextBlock", "text": text, "wrap": True})
        card = {"$schema": SCHEMA, "type": "AdaptiveCard",
                "version": self.settings.card_version, "body": body}
        return Rendered(self.destination, {"type": "message", "attachments": [
            {"contentType": CARD, "contentUrl": None, "content": card}]})

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()
        return await post(self.http, self.settings.webhook_url, body,
                          {"Content-Type": "application/json"}, classify, "Teams")

    async def close(self) -> None:
        await self.http.close()


def classify(status: int, headers: Any, body: bytes) -> Outcome:
    if 200 <= status < 300:
        run = headers.get("x-ms-workflow-run-id")
        return Sent(run if isinstance(run, str) and RUN_ID_RE.fullmatch(run) else None)
    data = parse_json(body)
    error = data.get("error") if isinstance(data, dict) else None
    reason = f"HTTP {status}{provider_code(error, ('code',))}"
    if status == 429 or status >= 500:
        return Failed(reason, parse_retry_after(headers.get("Retry-After")))
    if status in (401, 403, 404):
        return Failed(f"{reason}: the workflow refused the URL (a wrong sig, or the workflow is "
                      "deleted or off); check webhook_url", final=True)
    if 300 <= status < 400:
        return Failed(f"{reason}: redirected; check webhook_url", final=True)
    return Failed(f"{reason}: Teams refused the card", final=True)


def build(name: str, settings: TeamsSettings, limits: Limits) -> TeamsChannel:
    return TeamsChannel(name, settings, limits)
