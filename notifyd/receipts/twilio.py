"""Twilio's webhook (POST /v1/webhooks/twilio): SMS status callbacks for the messages the twilio
channel sent (its StatusCallback is this URL with ?key=<step key>), and inbound messages, whose
opt-out keywords unsubscribe the sender's number.

Wire facts relied on (checked with the search tool):
- X-Twilio-Signature = base64(HMAC-SHA1(auth token, URL + every POST parameter as name+value,
  sorted by name, no separators)); the URL is the one Twilio called, query included; Twilio adds
  parameters without notice, so every received one is signed over:
  https://www.twilio.com/docs/usage/webhooks/webhooks-security,
  https://www.twilio.com/docs/messaging/guides/webhook-request ("Danger" box).
- The official validator (twilio-python twilio/request_validator.py, RequestValidator.validate)
  accepts the URL with and without its port (adding :443 for https, :80 for http, or removing any
  port given), signs the values of a repeated name sorted and deduplicated, and for a JSON body
  checks `bodySHA256=<hex SHA-256 of the body>` in the URL and signs the URL alone.
- A request signed with a Webhooks SharedKey instead of the auth token carries
  X-Twilio-Webhooks-Signature-Settings (same file; twilio-node WebhookSignatureValidation.md):
  refused here, notifyd holds only the auth token.
- No timestamp in the scheme. Status callbacks are sent for changes after creation, not for the
  initial status (queued without a Messaging Service, accepted with one):
  https://www.twilio.com/docs/messaging/guides/outbound-message-status-in-status-callbacks;
  statuses: queued, sending, sent, failed, delivered, undelivered, receiving, received, accepted,
  scheduled, read, partially_delivered, canceled (the Message resource's status enum).
- Error codes: 21610 recipient replied STOP; 21211 invalid To; 21614 To not a mobile number;
  21635 To is a landline; 30005 unknown destination handset; 30006 landline or unreachable
  carrier; 30003 handset unreachable for now (not dead): https://www.twilio.com/docs/api/errors/<code>
- Default opt-out keywords STOP, UNSUBSCRIBE, END, QUIT, STOPALL, REVOKE, OPTOUT, CANCEL; with
  Advanced Opt-Out the inbound request also carries OptOutType=STOP|START|HELP:
  https://www.twilio.com/docs/messaging/tutorials/advanced-opt-out
- An inbound message is answered with TwiML; an empty <Response></Response> sends no reply:
  https://www.twilio.com/docs/usage/webhooks/sms-webhooks

Choices. event_id = "MessageSid:MessageStatus" (inbound: the MessageSid), both signed: the
I-Twilio-Idempotency-Token header stands for the same thing but is outside the signature, so a
captured request replayed under a fresh token would pass as a new event. Of queued / accepted /
sending / sent only `sent` (handed to the carrier) is reported, as ACCEPTED: the send answer
already said Twilio has it, and `sent` alone tells a step whose answer was lost. Opt-in keywords
(START, UNSTOP, YES) are not reported: no Event undoes a suppression, and re-enabling a number
is a person's decision in notifyd, not a keyword's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from urllib.parse import parse_qs, parse_qsl, urlsplit

from notifyd.receipts.base import (
    BadReceipt,
    BadSignature,
    Event,
    Fetch,
    RawRequest,
    Receipt,
    json_of,
)
from notifyd.receipts.providers.twilio import EMPTY_TWIML as EMPTY_TWIML
from notifyd.receipts.providers.twilio import NAME
from notifyd.receipts.providers.twilio import PROVIDER as PROVIDER
from notifyd.receipts.providers.twilio import Settings as Settings

SIGNATURE_HEADER = "X-Twilio-Signature"
SHARED_KEY_HEADER = "X-Twilio-Webhooks-Signature-Settings"
MAX_FIELDS = 500  # Twilio sends a few dozen; more is not Twilio
SID_RE = re.compile(r"[A-Z]{2}[0-9a-fA-F]{32}")
E164_RE = re.compile(r"\+[1-9][0-9]{1,14}")
CODE_RE = re.compile(r"[0-9]{1,6}")
KEY_RE = re.compile(r"n_[0-9a-z]{18}:[0-9]{1,6}")

UNSUBSCRIBED_CODE = "21610"
# Codes that say the number itself cannot take SMS: the address is suppressed.
DEAD_NUMBER = frozenset({"21211", "21614", "21635", "30005", "30006"})
STATUS = {"sent": Event.ACCEPTED, "delivered": Event.DELIVERED, "read": Event.OPENED}
FAILED = frozenset({"failed", "undelivered"})
OPT_OUT = frozenset({"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "REVOKE",
                     "OPTOUT"})

Params = dict[str, list[str]]


async def parse(request: RawRequest, settings: Settings, now: int, fetch: Fetch) -> list[Receipt]:
    params = verify(request, settings.auth_token)
    sid = _one(params, "MessageSid")
    if sid is None or not SID_RE.fullmatch(sid):
        raise BadReceipt("MessageSid is missing or not a Twilio SID")
    status = _one(params, "MessageStatus")
    if status is not None:
        return _status_callback(params, sid, status, _step_key(request.url))
    if _one(params, "Body") is not None:
        return _inbound(params, sid)
    return []


def verify(request: RawRequest, auth_token: str) -> Params:
    """The request's parameters once its signature checks out over the URL and every
    parameter (or, for a JSON body, over the URL whose bodySHA256 matches the body)."""
    if not auth_token:
        raise BadSignature("no auth_token is configured")
    signature = request.headers.get(SIGNATURE_HEADER)
    if not signature:
        raise BadSignature(f"missing the {SIGNATURE_HEADER} header")
    if request.headers.get(SHARED_KEY_HEADER):
        raise BadSignature(f"signed with a Webhooks shared key ({SHARED_KEY_HEADER}); "
                           "notifyd verifies the auth token's signature only")
    try:
        body_hash = parse_qs(urlsplit(request.url).query).get("bodySHA256")
    except ValueError:
        raise BadSignature("the request URL cannot be parsed") from None
    if body_hash:
        if not hmac.compare_digest(hashlib.sha256(request.body).hexdigest().encode(),
                                   body_hash[0].encode()):
            raise BadSignature("bodySHA256 does not match the body")
        signed: Params = {}
    else:
        signed = _form(request.body)
    got = signature.encode()
    key = auth_token.encode()
    if not any(hmac.compare_digest(_sign(key, url, signed), got) for url in _urls(request.url)):
        raise BadSignature("the signature does not match")
    return _json(request.body) if body_hash else signed


def _sign(key: bytes, url: str, params: Params) -> bytes:
    text = url + "".join(name + value for name in sorted(params)
                         for value in sorted(set(params[name])))
    return base64.b64encode(hmac.new(key, text.encode(), hashlib.sha1).digest())


def _urls(url: str) -> list[str]:
    """The URL as received, without its port and with the scheme's default port, as the
    official validator tries (Twilio's signing is inconsistent about the port)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        return [url]
    if port is not None:
        other = parts._replace(netloc=parts.netloc[:parts.netloc.rfind(":")])
    else:
        default = 443 if parts.scheme == "https" else 80
        other = parts._replace(netloc=f"{parts.netloc}:{default}")
    return list(dict.fromkeys((url, other.geturl(), parts.geturl())))


def _form(body: bytes) -> Params:
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, errors="strict",
                          max_num_fields=MAX_FIELDS)
    except ValueError:  # UnicodeDecodeError included; too many fields
        raise BadSignature("the body is not form data as Twilio sends it (UTF-8, at most "
                           f"{MAX_FIELDS} fields)") from None
    params: Params = {}
    for name, value in pairs:
        params.setdefault(name, []).append(value)
    return params


def _json(body: bytes) -> Params:
    """A verified JSON body read as parameters (scalars only; nested values are skipped)."""
    data = json_of(body, BadReceipt)
    if not isinstance(data, dict):
        raise BadReceipt("the body is not a JSON object")
    return {k: [v if isinstance(v, str) else json.dumps(v)] for k, v in data.items()
            if isinstance(v, str | int | float) and not isinstance(v, bool)}


def _one(params: Params, name: str) -> str | None:
    values = params.get(name)
    return values[0] if values else None


def _step_key(url: str) -> str | None:
    """notifyd's step key from the StatusCallback query (?key=n_...:STEP), when well formed."""
    key = parse_qs(urlsplit(url).query).get("key")
    return key[0] if key and KEY_RE.fullmatch(key[0]) else None


def _number(value: str | None) -> str | None:
    return value if value is not None and E164_RE.fullmatch(value) else None


def _status_callback(params: Params, sid: str, status: str, key: str | None) -> list[Receipt]:
    code = _one(params, "ErrorCode")
    code = code if code is not None and CODE_RE.fullmatch(code) else None
    if status in STATUS:
        event, detail = STATUS[status], None
    elif status in FAILED:
        if code == UNSUBSCRIBED_CODE:
            event = Event.UNSUBSCRIBED
        elif code in DEAD_NUMBER:
            event = Event.BOUNCED
        else:
            event = Event.FAILED
        detail = code
    elif status == "canceled":
        event, detail = Event.FAILED, "canceled"
    else:  # queued, accepted, sending, scheduled, receiving, received, ...: nothing new
        return []
    to = _number(_one(params, "To"))
    return [Receipt(NAME, f"{sid}:{status}", event, None, provider_ref=sid, key=key,
                    address=to, channel_type="sms" if to else None, detail=detail)]


def _inbound(params: Params, sid: str) -> list[Receipt]:
    word = (_one(params, "Body") or "").strip().upper()
    if word not in OPT_OUT:
        if _one(params, "OptOutType") != "STOP":
            return []  # opt-in keywords and every other text: nothing to report
        word = "OptOutType=STOP"  # a keyword of the Messaging Service's own: never echoed
    sender = _number(_one(params, "From"))
    if sender is None:
        return []  # not a phone number notifyd could have texted
    return [Receipt(NAME, sid, Event.UNSUBSCRIBED, None, address=sender,
                    channel_type="sms", detail=word)]

