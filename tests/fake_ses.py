"""A local server that speaks Amazon SES's API v2 SendEmail (POST /v2/email/outbound-emails), for
the ses channel's tests.

It checks what SES checks, first the signature: the Authorization header's Signature Version 4
is recomputed by botocore's own SigV4Auth over the request as it arrived (method, path, the
headers it names as signed, the body), for the key id's secret, the region and the service name
"ses", with the X-Amz-Date it carries (and the session token of temporary credentials); a
mismatch, a time more than 5 minutes off, an unknown key id or a missing or wrong session token
get SES's 403s. Then the body as botocore's sesv2 service model describes it: a verified sender,
one recipient, Simple content (Subject, Body, at most 15 Headers of printable ASCII) or Raw
content (base64 MIME, parsed), EmailTags in their alphabet, an existing configuration set. It
answers as SES does: 200 {"MessageId"}; 400 BadRequestException "Illegal address" for a
recipient whose local part is not 7-bit ASCII (which SES does not support); MessageRejected for
an unverified recipient while `sandbox` is on; 404 NotFoundException for an unknown
configuration set; 429 TooManyRequestsException while `throttled`; 503 while `down`. Errors
name their type in x-amzn-ErrorType with {"message"} bodies, as rest-json services do.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import email
import email.policy
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from email.utils import parseaddr
from typing import Any

from aiohttp import web
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from fake_api import FakeApi

REGION = "eu-west-1"
ACCESS_KEY = "AKIAEXAMPLE7QUICKSES"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSESKEYSECRET"
TEMP_KEY = "ASIAEXAMPLETEMPKEY01"
TEMP_SECRET = "tEmPoRaRy/SeCrEt/kEy+ForSESv2tests00001"
TEMP_TOKEN = "IQoJb3JpZ2luX2VjEXAMPLEsessionTOKEN//////////wEaCWV1LXdlc3QtMSJHMEUCIQ=="
SENDER = "alerts@mail.acme.test"
CONFIGURATION_SET = "notifyd-events"
CORAL = "http://internal.amazon.com/coral/com.amazonaws.sesv2/"
SKEW_SEC = 300
AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([a-z0-9-]+)/([a-z0-9]+)/"
                     r"aws4_request, SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")
TAG_RE = re.compile(r"^[A-Za-z0-9_-]{1,256}$")
HEADER_NAME_RE = re.compile(r"^[!-9;-~]{1,126}$")


def ses_error(status: int, kind: str, message: str,
              headers: dict[str, str] | None = None) -> web.Response:
    """An error as SES's rest-json API answers it."""
    return web.json_response({"message": message}, status=status, headers={
        "x-amzn-ErrorType": f"{kind}:{CORAL}", "x-amzn-RequestId": str(uuid.uuid4()),
        **(headers or {})})


@dataclass
class FakeSes(FakeApi):
    keys: dict[str, tuple[str, str]] = field(default_factory=lambda: {
        ACCESS_KEY: (SECRET_KEY, ""), TEMP_KEY: (TEMP_SECRET, TEMP_TOKEN)})
    verified: set[str] = field(default_factory=lambda: {SENDER})
    configuration_sets: set[str] = field(default_factory=lambda: {CONFIGURATION_SET})
    sandbox: bool = False
    sandbox_verified: set[str] = field(default_factory=set)
    clock: Callable[[], float] = time.time
    signatures_checked: int = 0  # how many signatures botocore recomputed and matched

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v2/email/outbound-emails", self.handle)

    async def answer(self, request: web.Request, body: bytes) -> web.StreamResponse:
        refused = self.authenticate(request, body)
        if refused is not None:
            return refused
        if self.down:
            return ses_error(503, "ServiceUnavailable", "Service Unavailable")
        if self.throttled:
            return ses_error(429, "TooManyRequestsException", "Maximum sending rate exceeded.")
        try:
            mail = json.loads(body)
        except ValueError:
            return ses_error(400, "BadRequestException", "Could not parse request body")
        refused = self.validate(mail)
        if refused is not None:
            return refused
        message_id = f"0102019{uuid.uuid4().hex[:9]}-{uuid.uuid4()}-000000"
        self.sent[message_id] = mail
        return web.json_response({"MessageId": message_id},
                                 headers={"x-amzn-RequestId": str(uuid.uuid4())})

    def authenticate(self, request: web.Request, body: bytes) -> web.Response | None:
        m = AUTH_RE.match(request.headers.get("Authorization", ""))
        if m is None:
            return ses_error(403, "MissingAuthenticationTokenException",
                             "Missing Authentication Token")
        key_id, date, region, service, signed, signature = m.groups()
        if key_id not in self.keys:
            return ses_error(403, "UnrecognizedClientException",
                             "The security token included in the request is invalid.")
        secret, token = self.keys[key_id]
        if token and request.headers.get("X-Amz-Security-Token") != token:
            return ses_error(403, "UnrecognizedClientException",
                             "The security token included in the request is invalid.")
        stamp = request.headers.get("X-Amz-Date", "")
        try:
            when = calendar.timegm(time.strptime(stamp, "%Y%m%dT%H%M%SZ"))
        except ValueError:
            return ses_error(400, "IncompleteSignatureException", "Date must be in ISO-8601 "
                             "'basic format'.")
        if abs(when - self.clock()) > SKEW_SEC:
            return ses_error(403, "InvalidSignatureException", "Signature expired")
        names = signed.split(";")
        if stamp[:8] != date or region != REGION or service != "ses" \
                or not {"host", "x-amz-date"} <= set(names) \
                or (token and "x-amz-security-token" not in names):
            return ses_error(403, "InvalidSignatureException", "Credential should be scoped "
                             "correctly.")
        expected = recompute(request, body, names, Credentials(key_id, secret, token or None),
                             region, stamp)
        if expected != signature:
            return ses_error(403, "InvalidSignatureException", "The request signature we "
                             "calculated does not match the signature you provided.")
        self.signatures_checked += 1
        return None

    def validate(self, mail: dict[str, Any]) -> web.Response | None:
        if mail.get("FromEmailAddress") is None or not self.verified_sender(mail):
            return ses_error(400, "MessageRejected", "Email address is not verified. The "
                             "following identities failed the check in region EU-WEST-1: "
                             f"{mail.get('FromEmailAddress')}")
        config = mail.get("ConfigurationSetName")
        if config is not None and config not in self.configuration_sets:
            return ses_error(404, "NotFoundException", f"Configuration set <{config}> does "
                             "not exist.")
        to = mail.get("Destination", {}).get("ToAddresses", [])
        if len(to) != 1:
            return ses_error(400, "BadRequestException", "Missing required field Destination")
        if not to[0].partition("@")[0].isascii():
            return ses_error(400, "BadRequestException", "Illegal address")
        if self.sandbox and to[0] not in self.sandbox_verified:
            return ses_error(400, "MessageRejected", "Email address is not verified. The "
                             f"following identities failed the check in region EU-WEST-1: {to[0]}")
        for tag in mail.get("EmailTags", []):
            if not (TAG_RE.match(tag.get("Name", "")) and TAG_RE.match(tag.get("Value", ""))):
                return ses_error(400, "BadRequestException", "Invalid tag value.")
        return content_problem(mail.get("Content", {}))

    def verified_sender(self, mail: dict[str, Any]) -> bool:
        address = parseaddr(mail["FromEmailAddress"])[1]
        return address in self.verified or address.partition("@")[2] in self.verified

    def email(self, message_id: str) -> dict[str, Any]:
        """What SES took: subject, bodies and headers, from Simple or Raw content alike."""
        content = self.sent[message_id]["Content"]
        if "Simple" in content:
            simple = content["Simple"]
            return {"subject": simple["Subject"]["Data"],
                    "text": simple["Body"].get("Text", {}).get("Data"),
                    "html": simple["Body"].get("Html", {}).get("Data"),
                    "headers": {h["Name"]: h["Value"] for h in simple.get("Headers", [])}}
        msg = email.message_from_bytes(base64.b64decode(content["Raw"]["Data"]),
                                       policy=email.policy.default)
        text = msg.get_body(("plain",))
        html = msg.get_body(("html",))
        return {"subject": str(msg["Subject"]),
                "text": text.get_content() if text is not None else None,  # type: ignore[attr-defined]
                "html": html.get_content() if html is not None else None,  # type: ignore[attr-defined]
                "headers": {k: str(v) for k, v in msg.items()}}


def recompute(request: web.Request, body: bytes, names: list[str], credentials: Credentials,
              region: str, stamp: str) -> str:
    """botocore's SigV4 signature of the request as it arrived: only the headers it says it
    signed, its own path and body, the time it carries."""
    url = f"http://{request.headers['Host']}{request.path_qs}"
    headers = {n: request.headers[n] for n in names if n != "host"}
    aws = AWSRequest(method=request.method, url=url, headers=headers, data=body)
    aws.headers["host"] = request.headers["Host"]
    aws.context["timestamp"] = stamp
    auth = SigV4Auth(credentials, "ses", region)
    canonical = auth.canonical_request(aws)
    signed: str = auth.signature(auth.string_to_sign(aws, canonical), aws)
    return signed


def content_problem(content: dict[str, Any]) -> web.Response | None:
    if "Raw" in content:
        try:
            raw = base64.b64decode(content["Raw"]["Data"], validate=True)
        except (binascii.Error, ValueError, KeyError):
            return ses_error(400, "BadRequestException", "Invalid base64 in Raw.Data")
        msg = email.message_from_bytes(raw, policy=email.policy.default)
        if not msg["From"] or not msg["Date"] or b"\r\n\r\n" not in raw:
            return ses_error(400, "MessageRejected", "Illegal header or missing required "
                             "headers.")
        return None
    simple = content.get("Simple")
    if not isinstance(simple, dict) or "Subject" not in simple or "Body" not in simple:
        return ses_error(400, "BadRequestException", "Missing required field Content")
    headers = simple.get("Headers", [])
    if len(headers) > 15 or not all(
            HEADER_NAME_RE.match(h.get("Name", "")) and 0 < len(h.get("Value", "")) <= 995
            and h["Value"].isascii() and h["Value"].isprintable() for h in headers):
        return ses_error(400, "BadRequestException", "Invalid message header.")
    return None
