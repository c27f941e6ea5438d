"""A Teams workflow's "When a Teams webhook request is received" trigger on 127.0.0.1, as Power
Automate answers it: POST /workflows/{id}/triggers/manual/paths/invoke?api-version=1&sp=...&sv=1.0
&sig=...

It checks the sig (401 {"error": {"code": "DirectApiAuthorizationRequired", ...}}), the workflow
(404 WorkflowNotFound) and the body: a "message" with one Adaptive Card attachment
(application/vnd.microsoft.card.adaptive, content.type AdaptiveCard, a version, a body of
elements), else 400 InvalidRequestContent. It answers 202 Accepted with x-ms-workflow-run-id,
or throttles after `limit` requests (429 WorkflowRequestsThrottled with Retry-After), or what a
test sets. Not confirmed from a primary source: the exact error codes in the bodies (they
follow Logic Apps' {"error": {"code", "message"}}); the adapter reads only the status and the
code's shape.

Sources: https://learn.microsoft.com/en-us/microsoftteams/platform/webhooks-and-connectors/how-to/connectors-using,
https://learn.microsoft.com/en-us/connectors/teams/#microsoft-teams-webhook,
https://adaptivecards.io/explorer/AdaptiveCard.html.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from channel_support import AppPeer

CARD = "application/vnd.microsoft.card.adaptive"
_runs = itertools.count(8_584_667_431_028_312_345)


def logic_error(status: int, code: str, message: str,
                headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status,
                             headers=headers)


@dataclass
class FakeTeams(AppPeer):
    workflow: str
    sig: str
    limit: int = 1000
    cards: list[dict[str, Any]] = field(default_factory=list)
    canned: web.Response | None = None

    @property
    def url(self) -> str:
        return (f"http://127.0.0.1:{self.port}/workflows/{self.workflow}/triggers/manual/paths/"
                f"invoke?api-version=1&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={self.sig}")

    async def _invoke(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["workflow"] != self.workflow:
            return logic_error(404, "WorkflowNotFound", "The workflow could not be found.")
        if request.query.get("sig") != self.sig:
            return logic_error(401, "DirectApiAuthorizationRequired",
                               "The request must be authenticated only by Shared Access scheme.")
        if self.canned is not None:
            return self.canned
        if len(self.cards) >= self.limit:
            return logic_error(429, "WorkflowRequestsThrottled", "Rate limit is exceeded.",
                               {"Retry-After": "20"})
        try:
            body = json.loads(await request.read())
            [attachment] = body["attachments"]
            card = attachment["content"]
            ok = (body["type"] == "message" and attachment["contentType"] == CARD
                  and card["type"] == "AdaptiveCard" and card["version"]
                  and isinstance(card["body"], list) and card["body"])
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            return logic_error(400, "InvalidRequestContent", "The request content is not valid")
        self.cards.append(card)
        return web.Response(status=202, headers={"x-ms-workflow-run-id": str(next(_runs))})

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/workflows/{workflow}/triggers/manual/paths/invoke", self._invoke)
