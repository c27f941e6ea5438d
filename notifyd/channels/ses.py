"""The ses channel: email through Amazon SES's API v2, one signed POST /v2/email/outbound-emails
(SendEmail) per step.

render freezes the whole JSON body: sender, recipient, content, reply-to, the configuration set
and two message tags, notifyd_key (the step key, "n_...-STEP": ":" is not allowed in a tag) and
notifyd_kind, which SES's event publishing hands back in mail.tags so receipts/ses.py finds the
step even when the send's answer was lost; send signs it (Signature Version 4, channels/sigv4.py)
at the time of each attempt and posts the same bytes. SES takes no idempotency key: a retry
after an Unknown may send the email twice. The MessageId SES answers is recorded as the
provider_ref, which is mail.messageId in every SES event and notification.

Content: "simple" by default. SES v2's Simple content takes up to 15 Headers, printable ASCII
values of at most 995 characters (botocore's sesv2 2019-09-27 service model: Message.Headers,
MessageHeader), which carries List-Unsubscribe and List-Unsubscribe-Post as the smtp channel
sends them, with SES building the MIME in UTF-8. "raw" hands over the MIME that the smtp channel
builds (channels/mime.py) with our Message-ID, for accounts whose policies want their own
headers; SES keeps the tags and configuration set of the request either way.

Wire facts relied on (checked with the search tool and botocore's sesv2 service model):
- POST https://email.{region}.amazonaws.com/v2/email/outbound-emails, rest-json, signing name
  "ses" (botocore data/sesv2/2019-09-27/service-2.json: metadata, operations.SendEmail, its
  errors' httpStatusCode): https://docs.aws.amazon.com/goto/WebAPI/sesv2-2019-09-27/SendEmail,
  https://docs.aws.amazon.com/cli/latest/reference/sesv2/send-email.html; body
  {FromEmailAddress, Destination {ToAddresses}, ReplyToAddresses, Content {Simple {Subject
  {Data, Charset}, Body {Text, Html}, Headers [{Name, Value}]} | Raw {Data: base64}},
  EmailTags [{Name, Value}] (letters, digits, _ and -, at most 256), ConfigurationSetName};
  200 answers {"MessageId": ...}.
- Errors name their type in the x-amzn-ErrorType header ("MessageRejected:http://...") or the
  body's __type / code, with a free-text message: TooManyRequestsException 429,
  LimitExceededException, AccountSuspendedException, SendingPausedException, MessageRejected,
  MailFromDomainNotVerifiedException, BadRequestException 400, NotFoundException 404 (a
  configuration set that does not exist); a recipient SES cannot parse is BadRequestException
  "Illegal address" (awsdocs/aws-doc-sdk-examples#5191); in the sandbox, an unverified recipient
  is MessageRejected "Email address is not verified" (not the address's fault). Signature and
  credential faults are 403 (and some 400): InvalidSignatureException ("Signature expired" more
  than 5 minutes off), UnrecognizedClientException, and AWS's common errors InvalidClientTokenId,
  IncompleteSignature, MissingAuthenticationToken, ExpiredTokenException, AccessDeniedException,
  NotAuthorized, OptInRequired, RequestExpired; ThrottlingException 400, ServiceUnavailable 503:
  https://docs.aws.amazon.com/ses/latest/APIReference/CommonErrors.html.
- An address on the account's suppression list is accepted and then bounced
  (OnAccountSuppressionList): that comes back as a receipt, never as the send's answer.

Outcomes: 2xx Sent(MessageId). BadRequestException or MessageRejected whose message says the
address is illegal: Rejected. 429, throttling and 5xx: Failed with Retry-After. Credentials and
permissions: Failed. Every other answer Failed: the account, the sender, the configuration set
or the request. Timeouts and connections lost after sending Unknown; refused connections Failed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from email.utils import format_datetime
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
from notifyd.channels.egress import DIRECT, Egress
from notifyd.channels.http import CODE_RE, parse_json, parse_retry_after, post
from notifyd.channels.mailapi import KEY_NAME, ApiChannel, Email, ascii_headers, blames, email_of, kind_tag
from notifyd.channels.mime import build_message
from notifyd.channels.sigv4 import Credentials, sign
from notifyd.channels.types.ses import TYPE as TYPE
from notifyd.channels.types.ses import SesSettings, endpoint_of
from notifyd.channels.types.smtp import DOT_ATOM, mailbox, parse_sender
from notifyd.channels.wire import target

PATH = "/v2/email/outbound-emails"
SERVICE = "ses"  # the signing name of SES's v2 API
TAG_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
ILLEGAL_ADDRESS_RE = re.compile(
    r"illegal address|missing final '@domain'|(?:local address|domain) contains "
    r"(?:control or whitespace|illegal character)|invalid email address", re.IGNORECASE)
CREDENTIALS = frozenset({
    "SignatureDoesNotMatch", "InvalidSignatureException", "IncompleteSignatureException",
    "UnrecognizedClientException", "InvalidClientTokenId", "ExpiredTokenException",
    "ExpiredToken", "AccessDeniedException", "AccessDenied", "IncompleteSignature",
    "MissingAuthenticationTokenException", "MissingAuthenticationToken", "NotAuthorized",
    "OptInRequired", "RequestExpired"})
THROTTLED = frozenset({"TooManyRequestsException", "ThrottlingException", "Throttling"})
ACCOUNT = frozenset({"AccountSuspendedException", "SendingPausedException",
                     "MailFromDomainNotVerifiedException", "LimitExceededException"})


class SesChannel(ApiChannel):
    def __init__(self, name: str, settings: SesSettings, timeout_sec: float,
                 max_connections: int = 100, egress: Egress = DIRECT,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(name, endpoint_of(settings).rstrip("/") + PATH, timeout_sec,
                         max_connections, egress)
        self.settings = settings
        self.credentials = Credentials(settings.access_key_id, settings.secret_access_key,
                                       settings.session_token)
        self.clock = clock  # the signing time: AWS refuses one more than 5 minutes off

    def render(self, step: RenderInput) -> Rendered:
        email = email_of(step)
        ascii_headers(email.headers)
        s = self.settings
        body: dict[str, Any] = {"FromEmailAddress": s.from_address,
                                "Destination": {"ToAddresses": [email.to]}}
        if s.content == "raw":
            body["Content"] = {"Raw": {"Data": raw_data(email, step, s)}}
        else:
            body["Content"] = {"Simple": simple(email)}
        if s.reply_to:
            body["ReplyToAddresses"] = [s.reply_to]
        tags = message_tags(f"{step.notification_id}:{step.step_no}", step.kind)
        if tags:
            body["EmailTags"] = tags
        if s.configuration_set:
            body["ConfigurationSetName"] = s.configuration_set
        return Rendered(email.to, body)

    async def send(self, message: Message) -> Outcome:
        body = json.dumps(message.payload, sort_keys=True).encode()
        headers = {"Content-Type": "application/json"}
        where = target(self.endpoint)
        headers |= sign("POST", where.host_header, where.path, headers, body,
                        credentials=self.credentials, region=self.settings.region,
                        service=SERVICE, now=self.clock())
        return await post(self.http, self.endpoint, body, headers, classify, "SES")


def simple(email: Email) -> dict[str, Any]:
    content: dict[str, Any] = {"Subject": {"Data": email.subject, "Charset": "UTF-8"}}
    body: dict[str, Any] = {}
    if email.text:
        body["Text"] = {"Data": email.text, "Charset": "UTF-8"}
    if email.html:
        body["Html"] = {"Data": email.html, "Charset": "UTF-8"}
    content["Body"] = body
    if email.headers:
        content["Headers"] = [{"Name": n, "Value": v} for n, v in email.headers.items()]
    return content


def raw_data(email: Email, step: RenderInput, s: SesSettings) -> str:
    """The MIME message, base64 as the JSON body carries a blob. Our Message-ID and the key
    header go in, as on the smtp channel, so either finds the step in SES's events. Addresses
    are written as the smtp channel writes them: ASCII local parts, IDNA domains."""
    try:
        sender, to = parse_sender(s.from_address), mailbox(email.to)
        reply_to = str(parse_sender(s.reply_to)) if s.reply_to else ""
    except ValueError as e:
        raise RenderError("address", e) from None
    key = f"{step.notification_id}:{step.step_no}"
    local = f"{step.notification_id}.{step.step_no}"
    if not (key.isascii() and DOT_ATOM.match(local)):
        local = f"{hashlib.sha256(local.encode()).hexdigest()[:32]}.{step.step_no}"
    headers = [["Auto-Submitted", "auto-generated"], ["X-Auto-Response-Suppress", "All"]]
    if reply_to:
        headers.append(["Reply-To", reply_to])
    headers += [[n, v] for n, v in email.headers.items()]
    if key.isascii() and key.isprintable():
        headers.append(["X-Notifyd-Key", key])
    when = datetime.fromtimestamp((step.now or step.created_at) / 1000, tz=UTC)
    mime = build_message({
        "date": format_datetime(when), "from": str(sender), "to": to, "subject": email.subject,
        "message_id": f"<{local}@{sender.domain}>", "headers": headers,
        "text": email.text or "", "html": email.html})
    return base64.b64encode(mime).decode("ascii")


def message_tags(key: str, kind: str) -> list[dict[str, str]]:
    """The step key (":" as "-", which receipts/ses.py reads back) and the kind as SES message
    tags; a value outside the tag alphabet is left out: the receipt then matches on the message
    id alone."""
    tags = []
    value = key.replace(":", "-")
    if TAG_RE.fullmatch(value):
        tags.append({"Name": KEY_NAME, "Value": value})
    if kind_tag(kind, TAG_RE):
        tags.append({"Name": "notifyd_kind", "Value": kind})
    return tags


def error_code(headers: Mapping[str, str], data: object) -> str:
    """The AWS error type, from x-amzn-ErrorType or the body's __type / code, as a short code
    ("MessageRejected"), or ""; never the message beside it."""
    raw = headers.get("x-amzn-ErrorType")
    if not raw and isinstance(data, dict):
        found = data.get("__type", data.get("code", data.get("Code")))
        raw = found if isinstance(found, str) else None
    code = (raw or "").partition(":")[0].rpartition("#")[2].strip()
    return code if CODE_RE.match(code) else ""


def classify(status: int, headers: Mapping[str, str], body: bytes) -> Outcome:
    data = parse_json(body)
    if 200 <= status < 300:
        ref = data.get("MessageId") if isinstance(data, dict) else None
        return Sent(ref if isinstance(ref, str) and ref else None)
    code = error_code(headers, data)
    reason = f"HTTP {status}" + (f" {code}" if code else "")
    message = data.get("message", data.get("Message")) if isinstance(data, dict) else None
    if code in CREDENTIALS or status in (401, 403):
        return Failed(f"{reason}: SES refused our credentials or their permissions")
    if status == 429 or status >= 500 or code in THROTTLED:
        return Failed(reason, parse_retry_after(headers.get("Retry-After")))
    if code in ("BadRequestException", "MessageRejected") and blames(message, ILLEGAL_ADDRESS_RE):
        return Rejected(f"{reason}: SES refused the recipient address")
    if code == "MessageRejected":
        return Failed(f"{reason}: SES refused the message (a sandbox account sends only to "
                      "verified addresses)")
    if code in ACCOUNT:
        return Failed(f"{reason}: SES will not send for this account or sender now")
    return Failed(f"{reason}: SES refused the request; check the channel's settings")


def build(name: str, settings: SesSettings, limits: Limits) -> SesChannel:
    return SesChannel(name, settings, limits.timeout_sec, limits.max_connections, limits.egress)
