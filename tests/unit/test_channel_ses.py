"""The ses channel: Signature Version 4 recomputed by botocore in the stand-in (tests/fake_ses.py)
for long-term and temporary credentials, the body SES v2 takes (simple and raw content, the
configuration set, the message tags the SES receipt route reads back), the settings' checks, and
every SES answer mapped."""

from __future__ import annotations

import base64
import email
import email.policy
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_ses import (
    ACCESS_KEY,
    CONFIGURATION_SET,
    REGION,
    SECRET_KEY,
    SENDER,
    TEMP_KEY,
    TEMP_SECRET,
    TEMP_TOKEN,
    FakeSes,
    ses_error,
)

from notifyd.channels.base import Failed, Message, Outcome, Rejected, RenderError, RenderInput, Sent
from notifyd.channels.ses import SesChannel, classify, message_tags
from notifyd.channels.sigv4 import Credentials, sign
from notifyd.channels.types.ses import SesSettings
from notifyd.receipts.ses import read_key

TO = "ada.lovelace@example.org"
NOW = 1_790_000_001_000


@pytest.fixture
async def fake() -> AsyncIterator[FakeSes]:
    f = await FakeSes().start()
    try:
        yield f
    finally:
        await f.stop()


def settings(base_url: str, **kw: Any) -> SesSettings:
    return SesSettings(**{"region": REGION, "access_key_id": ACCESS_KEY,
                          "secret_access_key": SECRET_KEY, "from_address": f"Acme <{SENDER}>",
                          "configuration_set": CONFIGURATION_SET, "base_url": base_url, **kw})


def step(**kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": "n_01k9zq3x7c2m4v6b8n", "step_no": 2, "channel": "mail",
        "kind": "payment_failed", "user_id": "u-7", "params": {}, "created_at": NOW - 1000,
        "expires_at": NOW + 86_400_000, "address": TO, "locale": "en", "now": NOW,
        "content": {"subject": "Paiement refusé", "text": "Votre carte a été refusée.",
                    "html": "<p>Votre carte a été refusée.</p>"}}
    return RenderInput(**{**base, **kw})


async def send(channel: SesChannel, s: RenderInput | None = None) -> Outcome:
    rendered = channel.render(s or step())
    payload = json.loads(json.dumps(rendered.payload, sort_keys=True))
    try:
        return await channel.send(Message("n_01k9zq3x7c2m4v6b8n:2", rendered.destination,
                                          payload))
    finally:
        await channel.close()


# --- the request -------------------------------------------------------------------------------


def test_simple_content_is_the_body_ses_v2_takes_with_tags_and_configuration_set() -> None:
    ch = SesChannel("mail", settings("http://127.0.0.1:9", reply_to="help@acme.test"), 1.0)
    body = ch.render(step(transactional=False, unsubscribe_url="https://a.test/u/1")).payload
    assert body == {
        "FromEmailAddress": f"Acme <{SENDER}>", "Destination": {"ToAddresses": [TO]},
        "ReplyToAddresses": ["help@acme.test"], "ConfigurationSetName": CONFIGURATION_SET,
        "EmailTags": [{"Name": "notifyd_key", "Value": "n_01k9zq3x7c2m4v6b8n-2"},
                      {"Name": "notifyd_kind", "Value": "payment_failed"}],
        "Content": {"Simple": {
            "Subject": {"Data": "Paiement refusé", "Charset": "UTF-8"},
            "Body": {"Text": {"Data": "Votre carte a été refusée.", "Charset": "UTF-8"},
                     "Html": {"Data": "<p>Votre carte a été refusée.</p>", "Charset": "UTF-8"}},
            "Headers": [{"Name": "List-Unsubscribe", "Value": "<https://a.test/u/1>"},
                        {"Name": "List-Unsubscribe-Post",
                         "Value": "List-Unsubscribe=One-Click"}]}}}


def test_the_key_tag_is_what_the_ses_receipt_route_reads_back() -> None:
    [key, kind] = message_tags("n_01k9zq3x7c2m4v6b8n:2", "payment.failed")[:2] + [None]
    assert key is not None and read_key(key["Value"]) == "n_01k9zq3x7c2m4v6b8n:2"
    assert kind is None  # "." is outside SES's tag alphabet: the kind's tag is left out
    assert message_tags("n_odd/id:2", "x") == [{"Name": "notifyd_kind", "Value": "x"}]


async def test_botocore_recomputes_the_signature_of_long_term_and_temporary_keys(
        fake: FakeSes) -> None:
    for key, secret, token in ((ACCESS_KEY, SECRET_KEY, ""), (TEMP_KEY, TEMP_SECRET, TEMP_TOKEN)):
        ch = SesChannel("mail", settings(fake.base_url, access_key_id=key,
                                         secret_access_key=secret, session_token=token), 1.0)
        outcome = await send(ch)
        assert isinstance(outcome, Sent) and outcome.provider_ref in fake.sent, outcome
    assert fake.signatures_checked == 2
    temp = fake.seen[1].headers
    assert temp["X-Amz-Security-Token"] == TEMP_TOKEN
    assert "x-amz-security-token" in temp["Authorization"].split("SignedHeaders=")[1]
    assert f"Credential={TEMP_KEY}/" in temp["Authorization"]
    assert "/eu-west-1/ses/aws4_request" in temp["Authorization"]


async def test_a_session_token_left_out_or_a_clock_far_off_is_refused(fake: FakeSes) -> None:
    ch = SesChannel("mail", settings(fake.base_url, access_key_id=TEMP_KEY,
                                     secret_access_key=TEMP_SECRET), 1.0)
    missing = await send(ch)
    assert isinstance(missing, Failed)
    assert missing.reason.startswith("HTTP 403 UnrecognizedClientException")
    late = SesChannel("mail", settings(fake.base_url), 1.0, clock=lambda: fake.clock() - 900)
    expired = await send(late)
    assert isinstance(expired, Failed)
    assert expired.reason.startswith("HTTP 403 InvalidSignatureException")
    assert fake.sent == {}


def test_the_signature_matches_awss_own_worked_example() -> None:
    """AWS's documented GET example (IAM ListUsers, us-east-1, 2015-08-30T12:36:00Z) signs to
    the published value: the canonical request, string to sign and key chain agree with AWS's."""
    added = sign("GET", "iam.amazonaws.com", "/?Action=ListUsers&Version=2010-05-08",
                 {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}, b"",
                 credentials=Credentials("AKIDEXAMPLE",
                                         "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
                 region="us-east-1", service="iam", now=1440938160)
    assert added["X-Amz-Date"] == "20150830T123600Z"
    assert added["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, "
        "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7")


async def test_raw_content_is_the_smtp_channels_mime_with_our_message_id(fake: FakeSes) -> None:
    ch = SesChannel("mail", settings(fake.base_url, content="raw"), 1.0)
    outcome = await send(ch, step(transactional=False, unsubscribe_url="https://a.test/u/1"))
    assert isinstance(outcome, Sent)
    mail = fake.sent[outcome.provider_ref or ""]
    assert "Simple" not in mail["Content"] and mail["EmailTags"][0]["Name"] == "notifyd_key"
    msg = email.message_from_bytes(base64.b64decode(mail["Content"]["Raw"]["Data"]),
                                   policy=email.policy.default)
    assert msg["Message-ID"] == "<n_01k9zq3x7c2m4v6b8n.2@mail.acme.test>"
    assert msg["X-Notifyd-Key"] == "n_01k9zq3x7c2m4v6b8n:2"
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert str(msg["Subject"]) == "Paiement refusé" and msg["To"] == TO
    assert fake.email(outcome.provider_ref or "")["text"].strip() == "Votre carte a été refusée."


async def test_the_sandbox_and_an_unknown_configuration_set_are_ours_not_the_address(
        fake: FakeSes) -> None:
    fake.sandbox = True
    sandboxed = await send(SesChannel("mail", settings(fake.base_url), 1.0))
    assert isinstance(sandboxed, Failed) and "MessageRejected" in sandboxed.reason
    fake.sandbox = False
    missing = await send(SesChannel("mail", settings(fake.base_url, configuration_set="gone"),
                                    1.0))
    assert isinstance(missing, Failed) and missing.reason.startswith("HTTP 404 NotFoundException")


def test_render_refuses_what_ses_cannot_carry() -> None:
    ch = SesChannel("mail", settings("http://127.0.0.1:9"), 1.0)
    with pytest.raises(RenderError) as e:
        ch.render(step(transactional=False, unsubscribe_url="https://a.test/ü"))
    assert e.value.template == "unsubscribe_url"
    raw = SesChannel("mail", settings("http://127.0.0.1:9", content="raw"), 1.0)
    with pytest.raises(RenderError) as e:
        raw.render(step(address="zoë@example.org"))  # no SMTPUTF8: raw MIME cannot say it
    assert e.value.template == "address"


# --- settings -----------------------------------------------------------------------------------


def test_settings_name_the_key_and_never_echo_a_secret() -> None:
    assert settings("").problems() == []
    bad = SesSettings(region="Europe", access_key_id="AKIA X", secret_access_key="",
                      from_address="nobody", configuration_set="a b", content="mime",
                      base_url="ftp://x")
    problems = dict(bad.problems())
    assert set(problems) == {"region", "access_key_id", "secret_access_key", "from_address",
                             "configuration_set", "content", "base_url"}
    assert all("AKIA X" not in m for m in problems.values())
    assert SECRET_KEY not in repr(settings("", session_token=TEMP_TOKEN))
    assert TEMP_TOKEN not in repr(settings("", session_token=TEMP_TOKEN))


# --- every answer mapped ------------------------------------------------------------------------


def answer(status: int, kind: str, message: str) -> tuple[int, dict[str, str], bytes]:
    r = ses_error(status, kind, message)
    assert r.body is not None and isinstance(r.body, bytes)
    return status, dict(r.headers), r.body


CASES: list[tuple[str, tuple[int, dict[str, str], bytes], Outcome]] = [
    ("200", (200, {}, b'{"MessageId": "0102019abc-1"}'), Sent("0102019abc-1")),
    ("200 empty", (200, {}, b""), Sent(None)),
    ("illegal address", answer(400, "BadRequestException", "Illegal address"),
     Rejected("HTTP 400 BadRequestException: SES refused the recipient address")),
    ("missing domain", answer(400, "MessageRejected", "Missing final '@domain'"),
     Rejected("HTTP 400 MessageRejected: SES refused the recipient address")),
    ("sandbox", answer(400, "MessageRejected", f"Email address is not verified. {TO}"),
     Failed("HTTP 400 MessageRejected: SES refused the message (a sandbox account sends only "
            "to verified addresses)")),
    ("throttled", answer(429, "TooManyRequestsException", "Maximum sending rate exceeded."),
     Failed("HTTP 429 TooManyRequestsException")),
    ("paused", answer(400, "SendingPausedException", "Sending paused"),
     Failed("HTTP 400 SendingPausedException: SES will not send for this account or sender "
            "now")),
    ("quota", answer(400, "LimitExceededException", "Daily quota"),
     Failed("HTTP 400 LimitExceededException: SES will not send for this account or sender "
            "now")),
    ("signature", answer(403, "InvalidSignatureException", "does not match"),
     Failed("HTTP 403 InvalidSignatureException: SES refused our credentials or their "
            "permissions")),
    ("expired token 400", answer(400, "ExpiredTokenException", "expired"),
     Failed("HTTP 400 ExpiredTokenException: SES refused our credentials or their "
            "permissions")),
    ("denied", answer(403, "AccessDeniedException", "not authorized to ses:SendEmail"),
     Failed("HTTP 403 AccessDeniedException: SES refused our credentials or their "
            "permissions")),
    ("body __type", (400, {}, b'{"__type": "com.amazon#BadRequestException", '
                              b'"message": "Illegal address"}'),
     Rejected("HTTP 400 BadRequestException: SES refused the recipient address")),
    ("outage", answer(503, "ServiceUnavailable", "Service Unavailable"),
     Failed("HTTP 503 ServiceUnavailable")),
    ("html error page", (502, {}, b"<html>bad gateway</html>"), Failed("HTTP 502")),
    ("bad request", answer(400, "BadRequestException", f"Invalid header {TO}"),
     Failed("HTTP 400 BadRequestException: SES refused the request; check the channel's "
            "settings")),
]


@pytest.mark.parametrize(("status_headers_body", "expected"),
                         [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES])
def test_every_answer_is_classified(status_headers_body: tuple[int, dict[str, str], bytes],
                                    expected: Outcome) -> None:
    status, headers, body = status_headers_body
    assert classify(status, headers, body) == expected


def test_retry_after_is_honoured() -> None:
    outcome = classify(429, {"x-amzn-ErrorType": "TooManyRequestsException:",
                             "Retry-After": "7"}, b"{}")
    assert isinstance(outcome, Failed) and outcome.retry_after == 7.0
