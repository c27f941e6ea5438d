"""The whatsapp channel: an approved template message through Meta's WhatsApp Cloud API.

POST {base_url}/{api_version}/{phone_number_id}/messages, Authorization: Bearer <system user
token>, {"messaging_product": "whatsapp", "recipient_type": "individual", "to": <E.164>,
"type": "template", "template": {"name", "language": {"policy": "deterministic", "code"},
"components": [{"type": "body", "parameters": [{"type": "text", "text"} ...]}]},
"biz_opaque_callback_data": <step key>}. The kind's template comes from the channel's
[[templates]] entry of that kind, its language from the recipient's locale among those it is approved
in, its body variables from the params it names, in order (or by name). Templates only: the
24-hour customer service window lets free-form text through only within a day of the person's
last message to the business; a template reaches them at any time. So the kind's chat template
files are not rendered for this channel (ChannelType.templates = False), though its chat
preferences and limits apply.

The step key rides as biz_opaque_callback_data, which every status webhook of the message
carries back (receipts/whatsapp.py), and the message id (wamid) is the provider_ref.

Wire facts relied on (checked with the search tool, against Meta's reference where reachable):
- https://developers.facebook.com/docs/whatsapp/cloud-api/reference/messages (the request, the
  template object, biz_opaque_callback_data; 200 {"messaging_product", "contacts": [{"input",
  "wa_id"}], "messages": [{"id": "wamid..."}]}).
- https://developers.facebook.com/docs/whatsapp/cloud-api/guides/send-message-templates and
  .../conversation-types (the 24-hour customer service window; templates outside it).
- https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes: errors are
  {"error": {"message", "type", "code", "error_data": {"details"}, "error_subcode",
  "fbtrace_id"}}; throttling (4, 80007, 130429, 131048, 131056) comes with HTTP 400; 0 and 190
  the access token, 10 and 200-299 permissions, 131030 a recipient not on a test number's list,
  131026 undeliverable (not on WhatsApp, old app, terms not accepted), 131050 the person stopped
  marketing messages, 131047 outside the 24 hours (free-form only), 132000-132016 the template
  (missing, paused, wrong parameters), 131000 / 131016 / 1 / 2 Meta's trouble. The message and
  details may quote the number or parameters: only the code is kept.

Outcomes: 2xx Sent(wamid). Rejected: 131026 (no WhatsApp at that number: its whatsapp address is
suppressed) and 131050 (opted out of marketing). Every other answer Failed: throttling and
Meta's trouble retried (Retry-After, else a minute for throttling), the token and permissions
retried (a person fixes the config), the template and our request final. A timeout or a
connection lost after sending is Unknown; the Cloud API takes no idempotency key, so a retry may
deliver twice.
"""

from __future__ import annotations

import json
import re
from typing import Any

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    Rendered,
    RenderError,
    RenderInput,
    Sent,
)
from notifyd.channels.http import parse_json, parse_retry_after, post
from notifyd.channels.types.whatsapp import TYPE as TYPE
from notifyd.channels.types.whatsapp import WhatsAppSettings, WhatsAppTemplate
from notifyd.channels.wire import Client
from notifyd.core.contacts import E164

WAMID_RE = re.compile(r"wamid\.[A-Za-z0-9_=+/-]{1,200}")
MAX_PARAM_CHARS = 1024  # a body variable; WhatsApp refuses a longer one (132005)
THROTTLED = frozenset({4, 80007, 130429, 131048, 131056})
THROTTLE_WAIT_SEC = 60.0
AUTH = frozenset({0, 190})
DEAD = {131026: "the number cannot take WhatsApp messages (not on WhatsApp, or the app is "
                "too old, or its terms are not accepted)",
        131050: "the person stopped marketing messages from this business"}
RETRIED = frozenset({1, 2, 131000, 131016, 131049})  # Meta's trouble, or "try again later"


def pick_language(template: WhatsAppTemplate, locale: str | None) -> str:
    """The template's language for a recipient's locale: exact (de_AT for de-AT), else the
    locale's language alone (de), else the first the template names."""
    if locale:
        wanted = locale.replace("-", "_")
        by_lower = {code.lower(): code for code in template.languages}
        for candidate in (wanted.lower(), wanted.split("_")[0].lower()):
            if candidate in by_lower:
                return by_lower[candidate]
    return template.languages[0]


def parameters(template: WhatsAppTemplate, params: dict[str, Any]) -> list[dict[str, str]]:
    """The body's parameters from the notification's params, as the template takes them."""
    out = []
    for name in template.parameters:
        value = params.get(name)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise RenderError(f"whatsapp.{name}", KeyError(name) if value is None
                              else TypeError("not a text or a number"))
        text = str(value)
        if not text.strip() or len(text) > MAX_PARAM_CHARS:
            raise RenderError(f"whatsapp.{name}",
                              ValueError(f"must be 1-{MAX_PARAM_CHARS} characters"))
        item = {"type": "text", "text": text}
        if template.parameter_format == "named":
            item["parameter_name"] = name
        out.append(item)
    return out


class WhatsAppChannel:
    def __init__(self, name: str, settings: WhatsAppSettings, limits: Limits) -> None:
        self.name = name
        self.settings = settings
        self.url = (f"{settings.base_url.rstrip('/')}/{settings.api_version}/"
                    f"{settings.phone_number_id}/messages")
        self._auth = f"Bearer {settings.access_token}"
        self.http = Client(limits.max_connections, limits.timeout_sec, limits.egress)

    def __repr__(self) -> str:
        return f"WhatsAppChannel({self.name!r})"

    def render(self, step: RenderInput) -> Rendered:
        number = (step.address or "").strip()
        if not E164.fullmatch(number):
            raise RenderError("whatsapp", ValueError("not an E.164 phone number"))
        template = self.settings.template_for(step.kind)
        if template is None:
            raise RenderError("whatsapp", LookupError(f"no template for the kind {step.kind}"))
        body: dict[str, Any] = {"name": template.name, "language": {
            "policy": "deterministic", "code": pick_language(template, step.locale)}}
        params = parameters(template, step.params)
        if params:
            body["components"] = [{"type": "body", "parameters": params}]
        return Rendered(number, {"messaging_product": "whatsapp", "recipient_type": "individual",
                                 "to": number, "type": "template", "template": body})

    async def send(self, message: Message) -> Outcome:
        fields = {**message.payload, "biz_opaque_callback_data": message.idempotency_key}
        body = json.dumps(fields, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode()
        headers = {"Authorization": self._auth, "Content-Type": "application/json"}
        return await post(self.http, self.url, body, headers, classify, "WhatsApp")

    async def close(self) -> None:
        await self.http.close()


def meta_code(data: object) -> int | None:
    """The Graph API error's numeric code, never its message."""
    error = data.get("error") if isinstance(data, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def classify(status: int, headers: Any, body: bytes) -> Outcome:  # noqa: C901 - one rule a line
    data = parse_json(body)
    if 200 <= status < 300:
        messages = data.get("messages") if isinstance(data, dict) else None
        first = messages[0] if isinstance(messages, list) and messages else None
        ref = first.get("id") if isinstance(first, dict) else None
        return Sent(ref if isinstance(ref, str) and WAMID_RE.fullmatch(ref) else None)
    code = meta_code(data)
    reason = f"HTTP {status}" + (f" WhatsApp {code}" if code is not None else "")
    wait = parse_retry_after(headers.get("Retry-After"))
    if code in DEAD:
        return Rejected(f"{reason}: {DEAD[code]}")
    if code in THROTTLED or status == 429:
        return Failed(f"{reason}: throttled", THROTTLE_WAIT_SEC if wait is None else wait)
    if code in RETRIED or status >= 500:
        return Failed(reason, wait)
    if code in AUTH or status == 401:
        return Failed(f"{reason}: Meta refused the access token; check access_token")
    if code is not None and (code == 10 or 200 <= code <= 299 or status == 403):
        return Failed(f"{reason}: the token may not send for this phone number")
    if code is not None and 132000 <= code <= 132999:
        return Failed(f"{reason}: the template was refused (missing, paused, or its parameters "
                      "differ); check the channel's templates", final=True)
    if code == 131030:
        return Failed(f"{reason}: a test number may send only to its allowed list", final=True)
    if status == 404 or 300 <= status < 400:
        return Failed(f"{reason}: check phone_number_id, api_version and base_url")
    return Failed(f"{reason}: WhatsApp refused the request", final=True)


def build(name: str, settings: WhatsAppSettings, limits: Limits) -> WhatsAppChannel:
    return WhatsAppChannel(name, settings, limits)
