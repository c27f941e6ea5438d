"""The twilio receipt parser against requests signed by Twilio's own helper library
(twilio.request_validator.RequestValidator.compute_signature), shaped as Twilio's status callbacks
and inbound-message requests are: form-encoded, every parameter signed, the URL with notifyd's
?key=<step key>."""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import pytest
from multidict import CIMultiDict
from twilio.request_validator import RequestValidator

from notifyd.receipts.base import BadReceipt, BadSignature, Event, RawRequest, Receipt
from notifyd.receipts.twilio import EMPTY_TWIML, PROVIDER, Settings, parse

TOKEN = "2f3c9a7be15d4c0e8a6b7d9e1f0a2b3c"
SETTINGS = Settings(auth_token=TOKEN)
BASE = "https://notifyd.example.com/v1/webhooks/twilio"
KEY = "n_0kx7c3v9q2m4r8t1w6:2"
URL = f"{BASE}?{urlencode({'key': KEY})}"  # as the channel writes StatusCallback
SID = "SM" + "4be0c2f1" * 4
ACCOUNT = "AC" + "3f" * 16
TO = "+14155550123"
FROM = "+15017122661"
NOW = 1_790_000_000_000
SECRETS = (TOKEN, TO, FROM)


async def no_fetch(url: str) -> bytes:
    raise AssertionError("the twilio parser never fetches")


def status_params(status: str, **extra: str) -> dict[str, str]:
    """A status callback as Twilio posts it (https://www.twilio.com/docs/messaging/guides/
    track-outbound-message-status): both the Message* and the older Sms* names."""
    return {"AccountSid": ACCOUNT, "ApiVersion": "2010-04-01", "From": FROM, "MessageSid": SID,
            "MessageStatus": status, "SmsSid": SID, "SmsStatus": status, "To": TO, **extra}


def inbound_params(body: str, **extra: str) -> dict[str, str]:
    return {"AccountSid": ACCOUNT, "ApiVersion": "2010-04-01", "Body": body, "From": FROM,
            "FromCountry": "US", "MessageSid": SID, "NumMedia": "0", "NumSegments": "1",
            "SmsMessageSid": SID, "SmsSid": SID, "SmsStatus": "received", "To": TO,
            "ToCountry": "US", **extra}


def request(params: dict[str, Any] | list[tuple[str, str]], url: str = URL, *,
            signed_url: str | None = None, token: str = TOKEN, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> RawRequest:
    signature = RequestValidator(token).compute_signature(signed_url or url, _multi(params))
    raw = urlencode(params).encode() if body is None else body
    h = CIMultiDict({"X-Twilio-Signature": signature,
                     "Content-Type": "application/x-www-form-urlencoded",
                     "I-Twilio-Idempotency-Token": "idem-1"})
    h.update(headers or {})
    return RawRequest("POST", url, h, raw, dict(parse_qsl(urlsplit(url).query)))


class _Multi(dict[str, list[str]]):
    def getall(self, name: str) -> list[str]:
        return self[name]


def _multi(params: dict[str, Any] | list[tuple[str, str]]) -> _Multi:
    out = _Multi()
    for name, value in params.items() if isinstance(params, dict) else params:
        out.setdefault(name, []).append(value)
    return out


async def run(req: RawRequest, settings: Settings = SETTINGS) -> list[Receipt]:
    return await parse(req, settings, NOW, no_fetch)


async def refused(exc: type[Exception], req: RawRequest, settings: Settings = SETTINGS) -> str:
    with pytest.raises(exc) as info:
        await run(req, settings)
    message = str(info.value)
    assert message
    assert not any(s in message for s in SECRETS)
    return message


@pytest.mark.parametrize(("status", "extra", "event", "detail"), [
    ("sent", {}, Event.ACCEPTED, None),
    ("delivered", {}, Event.DELIVERED, None),
    ("read", {}, Event.OPENED, None),
    ("undelivered", {"ErrorCode": "30003"}, Event.FAILED, "30003"),
    ("failed", {"ErrorCode": "30007"}, Event.FAILED, "30007"),
    ("failed", {}, Event.FAILED, None),
    ("failed", {"ErrorCode": "21610"}, Event.UNSUBSCRIBED, "21610"),
    ("undelivered", {"ErrorCode": "30005"}, Event.BOUNCED, "30005"),
    ("undelivered", {"ErrorCode": "30006"}, Event.BOUNCED, "30006"),
    ("failed", {"ErrorCode": "21211"}, Event.BOUNCED, "21211"),
    ("failed", {"ErrorCode": "21614"}, Event.BOUNCED, "21614"),
    ("failed", {"ErrorCode": "21635"}, Event.BOUNCED, "21635"),
    ("failed", {"ErrorCode": "not-a-code"}, Event.FAILED, None),
    ("canceled", {}, Event.FAILED, "canceled"),
])
async def test_status_callbacks(status: str, extra: dict[str, str], event: Event,
                                detail: str | None) -> None:
    [r] = await run(request(status_params(status, **extra)))
    assert r == Receipt("twilio", f"{SID}:{status}", event, None, provider_ref=SID, key=KEY,
                        address=TO, channel_type="sms", detail=detail)


@pytest.mark.parametrize("status", ["queued", "accepted", "sending", "scheduled", "receiving",
                                    "received", "partially_delivered", "someday_new"])
async def test_statuses_with_nothing_new_are_skipped(status: str) -> None:
    assert await run(request(status_params(status))) == []


async def test_a_retry_is_the_same_event_whatever_its_token() -> None:
    first = await run(request(status_params("delivered")))
    again = await run(request(status_params("delivered"),
                              headers={"I-Twilio-Idempotency-Token": "a-fresh-token"}))
    assert first == again


async def test_new_parameters_twilio_adds_are_signed_over() -> None:
    params = status_params("delivered", RawDlrDoneDate="2510091230", ChannelStatusMessage="x y",
                           Unheard_Of_Yet="ü & = +")
    [r] = await run(request(params))
    assert r.event == Event.DELIVERED


async def test_the_encoding_of_the_form_does_not_matter_only_the_values() -> None:
    params = status_params("delivered", ChannelStatusMessage="a b")
    body = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())
    assert "%20" in body  # urlencode would write "+": the same values, other bytes
    [r] = await run(request(params, body=body.encode()))
    assert r.event == Event.DELIVERED


async def test_repeated_names_are_signed_as_the_official_validator_does() -> None:
    params = [*status_params("delivered").items(), ("MediaUrl", "b"), ("MediaUrl", "a")]
    [r] = await run(request(params))
    assert r.event == Event.DELIVERED


@pytest.mark.parametrize(("received", "signed"), [
    (URL, URL.replace("example.com/", "example.com:443/")),
    (URL.replace("example.com/", "example.com:443/"), URL),
    (URL.replace("https:", "http:"), URL.replace("https:", "http:").replace(".com/", ".com:80/")),
    (URL.replace("https:", "http:").replace(".com/", ".com:80/"), URL.replace("https:", "http:")),
])
async def test_the_url_with_or_without_its_port(received: str, signed: str) -> None:
    [r] = await run(request(status_params("delivered"), received, signed_url=signed))
    assert r.key == KEY


async def test_a_json_body_is_checked_against_body_sha256() -> None:
    body = json.dumps(status_params("delivered", ErrorCode="")).encode()
    url = f"{URL}&bodySHA256={hashlib.sha256(body).hexdigest()}"
    req = request({}, url, body=body)
    assert RequestValidator(TOKEN).validate(url, body.decode(), req.headers["X-Twilio-Signature"])
    [r] = await run(req)
    assert (r.event, r.provider_ref, r.key, r.address) == (Event.DELIVERED, SID, KEY, TO)
    tampered = body.replace(b"delivered", b"delivere\\u0064")  # same JSON, other bytes
    await refused(BadSignature, request({}, url, body=tampered))


async def test_the_key_is_read_only_when_it_is_notifyds() -> None:
    [r] = await run(request(status_params("delivered"), f"{BASE}?key=something-else"))
    assert (r.key, r.provider_ref) == (None, SID)
    [r] = await run(request(status_params("delivered"), BASE))
    assert r.key is None


async def test_an_address_that_is_not_e164_is_not_given() -> None:
    [r] = await run(request(status_params("failed", ErrorCode="21610", To="whatsapp:+14155550123")))
    assert (r.event, r.address, r.channel_type) == (Event.UNSUBSCRIBED, None, None)


@pytest.mark.parametrize("text", ["STOP", "stop", "  Stop \n", "STOPALL", "UNSUBSCRIBE", "cancel",
                                  "END", "quit", "REVOKE", "optout"])
async def test_an_opt_out_reply_unsubscribes_the_sender(text: str) -> None:
    [r] = await run(request(inbound_params(text)))
    assert r == Receipt("twilio", SID, Event.UNSUBSCRIBED, None, address=FROM,
                        channel_type="sms", detail=text.strip().upper())


async def test_advanced_opt_out_keywords_of_the_service_count_too() -> None:
    [r] = await run(request(inbound_params("ARRET", OptOutType="STOP")))
    assert (r.event, r.address, r.detail) == (Event.UNSUBSCRIBED, FROM, "OptOutType=STOP")


@pytest.mark.parametrize("text", ["START", "unstop", "YES", "HELP", "stop please", "Thanks!",
                                  "", "123456"])
async def test_other_replies_report_nothing(text: str) -> None:
    assert await run(request(inbound_params(text))) == []
    assert await run(request(inbound_params(text, OptOutType="START"))) == []


async def test_a_stop_from_something_not_a_phone_number_reports_nothing() -> None:
    assert await run(request(inbound_params("STOP", From="whatsapp:+15017122661"))) == []


async def test_neither_a_status_nor_a_message_reports_nothing() -> None:
    params = status_params("delivered")
    del params["MessageStatus"]
    assert await run(request(params)) == []


async def test_forged_and_wrong_signatures_are_refused() -> None:
    good = request(status_params("delivered"))
    forged = RawRequest(good.method, good.url, CIMultiDict(good.headers), good.body, good.query)
    forged.headers["X-Twilio-Signature"] = "AAAAAAAAAAAAAAAAAAAAAAAAAAA="  # type: ignore[index]
    await refused(BadSignature, forged)
    await refused(BadSignature, request(status_params("delivered"), token="0" * 32))
    await refused(BadSignature, good, Settings(auth_token="another-token"))


async def test_a_missing_signature_header_is_refused() -> None:
    good = request(status_params("delivered"))
    headers = CIMultiDict(good.headers)
    del headers["X-Twilio-Signature"]
    message = await refused(BadSignature, RawRequest("POST", URL, headers, good.body, good.query))
    assert "X-Twilio-Signature" in message


async def test_a_changed_body_is_refused() -> None:
    params = status_params("delivered")
    body = urlencode(params).encode()
    await refused(BadSignature, request(params, body=body[:-3]))  # truncated
    await refused(BadSignature, request(params, body=body + b"&Extra=1"))  # a parameter added
    await refused(BadSignature, request(params, body=body.replace(b"delivered", b"failed")))
    spaced = urlencode({**params, "To": f" {TO}"}).encode()  # whitespace changed in a value
    await refused(BadSignature, request(params, body=spaced))
    await refused(BadSignature, request(params, body=b"\xff\xfe"))


async def test_a_changed_url_is_refused() -> None:
    params = status_params("delivered")
    other_key = f"{BASE}?{urlencode({'key': 'n_0kx7c3v9q2m4r8t1w6:3'})}"
    await refused(BadSignature, request(params, other_key, signed_url=URL))
    behind_proxy = URL.replace("https://notifyd.example.com", "http://10.0.0.7:8080")
    await refused(BadSignature, request(params, behind_proxy, signed_url=URL))


async def test_a_shared_key_signature_is_refused_with_a_reason() -> None:
    req = request(status_params("delivered"),
                  headers={"X-Twilio-Webhooks-Signature-Settings": "key=k1,algorithm=HMAC_SHA256"})
    assert "shared key" in await refused(BadSignature, req)


async def test_no_auth_token_refuses_everything() -> None:
    await refused(BadSignature, request(status_params("delivered")), Settings())


async def test_a_verified_request_notifyd_cannot_read_is_a_bad_receipt() -> None:
    params = status_params("delivered")
    del params["MessageSid"]
    await refused(BadReceipt, request(params))
    await refused(BadReceipt, request({**status_params("delivered"), "MessageSid": "not-a-sid"}))
    body = b"[1, 2]"
    url = f"{URL}&bodySHA256={hashlib.sha256(body).hexdigest()}"
    await refused(BadReceipt, request({}, url, body=body))
    body = b"{not json"
    url = f"{URL}&bodySHA256={hashlib.sha256(body).hexdigest()}"
    await refused(BadReceipt, request({}, url, body=body))


def test_the_provider_answers_empty_twiml() -> None:
    assert PROVIDER.name == "twilio"
    assert PROVIDER.reply.content_type == "text/xml"
    assert PROVIDER.reply.body == EMPTY_TWIML == (
        b'<?xml version="1.0" encoding="UTF-8"?><Response></Response>')


def test_settings() -> None:
    assert not Settings().enabled()
    assert Settings().problems() == []
    assert SETTINGS.enabled() and SETTINGS.problems() == []
    problems = Settings(auth_token="abc def").problems()
    assert [k for k, _ in problems] == ["auth_token"]
    assert "abc def" not in problems[0][1]


async def test_an_unparseable_url_or_an_oversized_form_is_refused() -> None:
    good = request(status_params("delivered"))
    await refused(BadSignature, RawRequest("POST", "https://[notifyd/x?key=1", good.headers,
                                           good.body, {}))
    many = [*status_params("delivered").items(), *((f"X{i}", "1") for i in range(600))]
    await refused(BadSignature, request(many))
