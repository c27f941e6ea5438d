"""The mailgun channel: the form it freezes, the region's base (US or EU, each a stand-in of
tests/fake_mailgun.py), the settings' checks, and every Mailgun answer mapped."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import parse_qsl

import pytest
from fake_mailgun import API_KEY, DOMAIN, FakeMailgun

from notifyd.channels.base import Failed, Message, Outcome, Rejected, RenderInput, Sent
from notifyd.channels.mailgun import MailgunChannel, classify
from notifyd.channels.types.mailgun import MailgunSettings, base_of

TO = "ada.lovelace@example.org"


def settings(**kw: Any) -> MailgunSettings:
    return MailgunSettings(**{"api_key": API_KEY, "domain": DOMAIN,
                              "from_address": f"Acme <alerts@{DOMAIN}>", **kw})


def step(**kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": "n_01k9zq3x7c2m4v6b8n", "step_no": 1, "channel": "mail",
        "kind": "digest", "user_id": "u-7", "params": {}, "created_at": 1, "expires_at": 2,
        "address": TO, "locale": "en", "content": {"subject": "Hi", "html": "<b>Hello</b>"},
        "transactional": False, "unsubscribe_url": "https://a.test/u/1"}
    return RenderInput(**{**base, **kw})


def test_the_form_carries_headers_tag_and_the_key_variable() -> None:
    ch = MailgunChannel("mail", settings(reply_to="help@acme.test"), 1.0)
    assert ch.render(step()).payload == {
        "from": f"Acme <alerts@{DOMAIN}>", "to": TO, "subject": "Hi", "html": "<b>Hello</b>",
        "h:Reply-To": "help@acme.test", "h:List-Unsubscribe": "<https://a.test/u/1>",
        "h:List-Unsubscribe-Post": "List-Unsubscribe=One-Click", "o:tag": "digest",
        "v:notifyd_key": "n_01k9zq3x7c2m4v6b8n:1"}


def test_the_region_picks_the_base() -> None:
    assert base_of(settings()) == "https://api.mailgun.net"
    assert base_of(settings(region="eu")) == "https://api.eu.mailgun.net"
    assert MailgunChannel("m", settings(region="eu"), 1.0).endpoint == \
        f"https://api.eu.mailgun.net/v3/{DOMAIN}/messages"


async def test_each_regions_stand_in_takes_its_domains_mail_only() -> None:
    us, eu = await FakeMailgun().start(), await FakeMailgun(domains={"mg.acme.eu"}).start()
    try:
        async def send(**kw: Any) -> Outcome:
            ch = MailgunChannel("mail", settings(**kw), 1.0)
            rendered = ch.render(step())
            try:
                return await ch.send(Message("n_01k9zq3x7c2m4v6b8n:1", TO, rendered.payload))
            finally:
                await ch.close()

        sent = await send(base_url=us.base_url)
        assert isinstance(sent, Sent) and sent.provider_ref in us.sent
        assert not sent.provider_ref.startswith("<")  # as webhooks' message-id names it
        seen = us.seen[0]
        assert seen.path == f"/v3/{DOMAIN}/messages"
        assert seen.headers["Authorization"] == \
            "Basic " + base64.b64encode(f"api:{API_KEY}".encode()).decode()
        assert dict(parse_qsl(seen.body.decode()))["v:notifyd_key"] == "n_01k9zq3x7c2m4v6b8n:1"
        wrong = await send(base_url=eu.base_url)  # a US domain asked of the EU base
        assert wrong == Failed("HTTP 404: Mailgun has no such domain in this region; check "
                               "domain and region")
        eu_sent = await send(base_url=eu.base_url, domain="mg.acme.eu",
                             from_address="alerts@mg.acme.eu")
        assert isinstance(eu_sent, Sent) and eu_sent.provider_ref in eu.sent
    finally:
        await us.stop()
        await eu.stop()


def test_settings_name_the_key() -> None:
    assert settings().problems() == []
    problems = dict(MailgunSettings(api_key="", domain="localhost", region="asia",
                                    from_address="x").problems())
    assert set(problems) == {"api_key", "domain", "region", "from_address"}
    assert API_KEY not in repr(settings())


CASES: list[tuple[str, int, dict[str, str], bytes, Outcome]] = [
    ("200", 200, {}, b'{"id": "<2026.1.AB@mg.acme.test>", "message": "Queued. Thank you."}',
     Sent("2026.1.AB@mg.acme.test")),
    ("bad to", 400, {}, b'{"message": "\'to\' parameter is not a valid address. please check '
                        b'documentation"}',
     Rejected("HTTP 400: Mailgun refused the recipient address")),
    ("bad from", 400, {}, b'{"message": "\'from\' parameter is not a valid address."}',
     Failed("HTTP 400: Mailgun refused the request; check the channel's settings")),
    ("401", 401, {}, b"Forbidden",
     Failed("HTTP 401: Mailgun refused our API key, or the account may not send this")),
    ("403 sandbox", 403, {}, b'{"message": "Domain sandbox is not allowed to send"}',
     Failed("HTTP 403: Mailgun refused our API key, or the account may not send this")),
    ("429", 429, {"Retry-After": "3"}, b'{"message": "Too many requests"}',
     Failed("HTTP 429", 3.0)),
    ("503", 503, {}, b"Service Unavailable", Failed("HTTP 503")),
]


@pytest.mark.parametrize(("status", "headers", "body", "expected"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_answer_is_classified(status: int, headers: dict[str, str], body: bytes,
                                    expected: Outcome) -> None:
    assert classify(status, headers, body) == expected
