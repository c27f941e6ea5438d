"""The twilio channel: SMS through Twilio's Messages resource, one form-encoded POST per step.

render freezes the form fields (To, Body, From or MessagingServiceSid, ValidityPeriod); send adds
StatusCallback = server.public_url + "/v1/webhooks/twilio?key=<step key>", derived from
Message.idempotency_key alone, so a retry sends the same bytes and a delivery receipt can be
matched by the key even when the send's answer (and with it the MessageSid) was lost. Twilio
takes no idempotency key on Messages: a retry after an Unknown may send the SMS twice.

Wire facts relied on (checked with the search tool):
- POST {base}/2010-04-01/Accounts/{AccountSid}/Messages.json, application/x-www-form-urlencoded,
  HTTP basic auth with AccountSid:AuthToken or an API key's SID:secret; parameters To (E.164),
  Body (up to 1,600 characters), From or MessagingServiceSid, StatusCallback, ValidityPeriod
  (1..36000 seconds, default 36000); 201 answers the Message resource with sid and num_segments
  (a string; "0" at first when sent through a Messaging Service):
  https://www.twilio.com/docs/messaging/api/message-resource
- Error bodies are {"code", "message", "more_info", "status"}; the message may quote the number
  (e.g. "The 'To' number 5551234567 is not a valid phone number."), so only the code is kept:
  https://www.twilio.com/docs/usage/troubleshooting/debugging-your-application
- Codes: 20003 authenticate (401), 20404 not found, 20429 too many requests (429), 21211 invalid
  To, 21408 region not enabled in the account's geo permissions, 21606/21659/21661 From not a
  usable sender, 21608 unverified To on a trial account, 21610 recipient replied STOP, 21612
  this To/From combination cannot be sent (sender restrictions, routes), 21614 To is not a
  mobile number, 21635 To is a landline: https://www.twilio.com/docs/api/errors/<code>

Outcomes: 2xx Sent(sid, "segments=N"). Rejected only for codes that say the number is dead or
opted out: 21211, 21610, 21614, 21635 ("Twilio 21610"). Every other 4xx Failed: our account, our
sender or our request (21408, 21608, 21612, 21606, ...), credentials (401/403) included, so the
user's phone is never disabled for our configuration. 429 and 5xx Failed with Retry-After.
Timeouts and connections lost after sending Unknown; refused connections Failed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

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
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.http import basic_auth, parse_json, parse_retry_after, post
from notifyd.channels.types.twilio import TYPE as TYPE
from notifyd.channels.types.twilio import TwilioSettings
from notifyd.channels.wire import Client

WEBHOOK_PATH = "/v1/webhooks/twilio"
MAX_BODY_CHARS = 1600  # Twilio refuses longer bodies (21617)
MAX_VALIDITY_SEC = 36000  # Twilio's ceiling and its default
E164_RE = re.compile(r"^\+[1-9][0-9]{1,14}$")
DIGITS_RE = re.compile(r"^[0-9]{1,9}$")

# The codes that say the recipient's number is dead or has opted out: the contact is disabled.
DEAD_NUMBER = {
    21211: "not a valid phone number",
    21610: "the recipient opted out (STOP)",
    21614: "not a mobile number",
    21635: "a landline",
}
# Codes worth a word in the reason; every code not in DEAD_NUMBER is Failed.
OURS = {
    20003: "Twilio refused our credentials",
    20404: "no such account or resource; check account_sid and base_url",
    21408: "the account may not send to this region (geo permissions)",
    21608: "a trial account may send only to verified numbers",
    21612: "this sender cannot reach this number",
    21606: "the sender is not a usable Twilio sender",
    21659: "the sender is not a usable Twilio sender",
    21661: "the sender is not SMS-capable",
}


class TwilioChannel:
    def __init__(self, name: str, settings: TwilioSettings, timeout_sec: float,
                 max_connections: int = 100, public_url: str = "",
                 egress: Egress = DIRECT) -> None:
        self.name = name
        self.settings = settings
        self.endpoint = (f"{settings.base_url.rstrip('/')}/2010-04-01/Accounts/"
                         f"{quote(settings.account_sid, safe='')}/Messages.json")
        self.callback = public_url.rstrip("/") + WEBHOOK_PATH if public_url else ""
        if settings.api_key_sid:
            self.authorization = basic_auth(settings.api_key_sid, settings.api_key_secret)
        else:
            self.authorization = basic_auth(settings.account_sid, settings.auth_token)
        # As many connections as the lanes may send at once, so no send waits for a pooled one.
        self.http = Client(max_connections, timeout_sec, egress)

    def render(self, step: RenderInput) -> Rendered:
        number = (step.address or "").strip()
        if not number:
            raise RenderError("address", LookupError("the recipient has no phone number"))
        if not E164_RE.fullmatch(number):
            raise RenderError("address", ValueError("not an E.164 phone number"))
        text = step.content.get("text")
        if not text:
            raise RenderError("text", LookupError("the SMS has no text"))
        if len(text) > MAX_BODY_CHARS:
            raise RenderError("text", ValueError(f"longer than {MAX_BODY_CHARS} characters"))
        payload: dict[str, Any] = {"To": number, "Body": text}
        if self.settings.messaging_service_sid:
            payload["MessagingServiceSid"] = self.settings.messaging_service_sid
        else:
            payload["From"] = self.settings.from_number
        if step.now > 0:  # an SMS that reaches the handset after the step expired is noise
            ttl = (step.expires_at - step.now) // 1000
            if ttl < MAX_VALIDITY_SEC:
                payload["ValidityPeriod"] = str(max(1, ttl))
        return Rendered(number, payload)

    async def send(self, message: Message) -> Outcome:
        fields = {k: str(v) for k, v in message.payload.items()}
        if self.callback:
            fields["StatusCallback"] = f"{self.callback}?{urlencode({'key': message.idempotency_key})}"
        body = urlencode(sorted(fields.items())).encode()
        headers = {"Authorization": self.authorization, "Accept": "application/json",
                   "Content-Type": "application/x-www-form-urlencoded"}
        return await post(self.http, self.endpoint, body, headers, classify, "Twilio")

    async def close(self) -> None:
        await self.http.close()


def twilio_code(data: object) -> int | None:
    """Twilio's numeric error code, or None; never the message beside it."""
    code = data.get("code") if isinstance(data, dict) else None
    if isinstance(code, bool):
        return None
    if isinstance(code, int):
        return code
    if isinstance(code, str) and DIGITS_RE.fullmatch(code):
        return int(code)
    return None


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    data = parse_json(body)
    if 200 <= status < 300:
        return _sent(data)
    code = twilio_code(data)
    reason = f"HTTP {status}" + (f" Twilio {code}" if code is not None else "")
    if code in DEAD_NUMBER:
        return Rejected(f"{reason}: {DEAD_NUMBER[code]}")
    if status == 429 or status >= 500:
        return Failed(reason, parse_retry_after(headers.get("Retry-After")))
    if code in OURS:
        return Failed(f"{reason}: {OURS[code]}")
    if status in (401, 403):
        return Failed(f"{reason}: Twilio refused our credentials")
    return Failed(f"{reason}: Twilio refused the request; check the channel's settings")


def _sent(data: object) -> Sent:
    if not isinstance(data, dict):
        return Sent()
    sid = data.get("sid")
    ref = sid if isinstance(sid, str) and sid else None
    segments = data.get("num_segments")
    if isinstance(segments, int | str) and DIGITS_RE.fullmatch(str(segments)) and int(segments) > 0:
        return Sent(ref, f"segments={int(segments)}")
    return Sent(ref)


def build(name: str, settings: TwilioSettings, limits: Limits) -> TwilioChannel:
    return TwilioChannel(name, settings, limits.timeout_sec, limits.max_connections,
                         limits.public_url, limits.egress)

