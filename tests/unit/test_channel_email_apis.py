"""The four email API channels (ses, sendgrid, mailgun, postmark) against stand-ins that speak
each provider's wire format (tests/fake_<provider>.py): what each sends, and the failure table
docs/concepts.md promises, for each alike. Sent with the provider's message id; a bad address Rejected (the
address goes on the suppression list); throttling and an outage Failed and retried (Retry-After
honoured); bad credentials Failed, never Rejected; a connection lost after the request Unknown.
No reason carries a secret, the address or the message.

What only one provider does (SigV4 with temporary credentials, raw content, Postmark's inactive
recipients, Mailgun's regions, SendGrid's restricted keys) and each one's every answer mapped are
in test_channel_<provider>.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import fake_mailgun
import fake_postmark
import fake_sendgrid
import fake_ses
import pytest
from fake_api import FakeApi

from notifyd.channels import TYPES, build_channel
from notifyd.channels.base import (
    Channel,
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    RenderInput,
    Sent,
    Unknown,
)

TO = "ada.lovelace@example.org"
BAD = "zoë@example.org"  # fine to notifyd; each provider refuses the non-ASCII local part
NID, STEP = "n_01k9zq3x7c2m4v6b8n", 2
KEY = f"{NID}:{STEP}"
UNSUBSCRIBE = "https://notify.acme.test/u/Zm9vYmFy?c=digest"
MARK = "Qx7Zr"  # in the message's text: never in a reason
LIMITS = Limits(timeout_sec=1.0, max_connections=4)


@dataclass
class Carried:
    """What the provider took, read back from its stand-in."""

    to: str
    subject: str
    text: str | None
    headers: dict[str, str]  # List-Unsubscribe and the like, as the provider puts them on
    key: str | None  # the step key in the metadata its events hand back
    tag: str | None  # the kind, as its tag or category


@dataclass(frozen=True)
class Spec:
    fake: Callable[[], FakeApi]
    settings: Callable[[str], dict[str, Any]]  # base URL -> the channel's settings
    wrong: dict[str, Any]  # settings that the provider refuses as bad credentials
    secrets: tuple[str, ...]
    carried: Callable[[Any], Carried]  # the stand-in's record of one email -> what it took


def _ses_carried(mail: dict[str, Any]) -> Carried:
    simple = mail["Content"]["Simple"]
    tags = {t["Name"]: t["Value"] for t in mail.get("EmailTags", [])}
    key = tags.get("notifyd_key")
    return Carried(mail["Destination"]["ToAddresses"][0], simple["Subject"]["Data"],
                   simple["Body"].get("Text", {}).get("Data"),
                   {h["Name"]: h["Value"] for h in simple.get("Headers", [])},
                   key.replace("-", ":", 1) if key else None, tags.get("notifyd_kind"))


def _sendgrid_carried(mail: dict[str, Any]) -> Carried:
    text = [c["value"] for c in mail["content"] if c["type"] == "text/plain"]
    return Carried(mail["personalizations"][0]["to"][0]["email"], mail["subject"],
                   text[0] if text else None, mail.get("headers", {}),
                   mail.get("custom_args", {}).get("notifyd_key"),
                   (mail.get("categories") or [None])[0])


def _mailgun_carried(form: dict[str, str]) -> Carried:
    return Carried(form["to"], form["subject"], form.get("text"),
                   {k[2:]: v for k, v in form.items() if k.startswith("h:")},
                   form.get("v:notifyd_key"), form.get("o:tag"))


def _postmark_carried(mail: dict[str, Any]) -> Carried:
    return Carried(mail["To"], mail["Subject"], mail.get("TextBody"),
                   {h["Name"]: h["Value"] for h in mail.get("Headers", [])},
                   mail.get("Metadata", {}).get("notifyd_key"), mail.get("Tag"))


SPECS: dict[str, Spec] = {
    "ses": Spec(fake_ses.FakeSes, lambda base: {
        "region": fake_ses.REGION, "access_key_id": fake_ses.ACCESS_KEY,
        "secret_access_key": fake_ses.SECRET_KEY, "from_address": f"Acme <{fake_ses.SENDER}>",
        "configuration_set": fake_ses.CONFIGURATION_SET, "base_url": base},
        {"secret_access_key": "not/the/secret+at/all/0000000000000000000"},
        (fake_ses.SECRET_KEY, "not/the/secret"), _ses_carried),
    "sendgrid": Spec(fake_sendgrid.FakeSendgrid, lambda base: {
        "api_key": fake_sendgrid.API_KEY, "from_address": f"Acme <{fake_sendgrid.SENDER}>",
        "base_url": base}, {"api_key": "SG.revoked.key-0000"},
        (fake_sendgrid.API_KEY, "SG.revoked"), _sendgrid_carried),
    "mailgun": Spec(fake_mailgun.FakeMailgun, lambda base: {
        "api_key": fake_mailgun.API_KEY, "domain": fake_mailgun.DOMAIN,
        "from_address": f"Acme <alerts@{fake_mailgun.DOMAIN}>", "base_url": base},
        {"api_key": "key-wrong0000"}, (fake_mailgun.API_KEY, "key-wrong"), _mailgun_carried),
    "postmark": Spec(fake_postmark.FakePostmark, lambda base: {
        "server_token": fake_postmark.TOKEN, "from_address": f"Acme <{fake_postmark.SENDER}>",
        "base_url": base}, {"server_token": "wrong-server-token-0000"},
        (fake_postmark.TOKEN, "wrong-server-token"), _postmark_carried),
}


@dataclass
class Rig:
    name: str
    spec: Spec
    fake: FakeApi
    channel: Channel

    def rebuild(self, **settings: Any) -> Channel:
        values = {**self.spec.settings(self.fake.base_url), **settings}
        made = TYPES[self.name].settings(**values)
        assert made.problems() == []
        return build_channel("mail", self.name, made, LIMITS)


@pytest.fixture(params=sorted(SPECS))
async def rig(request: pytest.FixtureRequest) -> AsyncIterator[Rig]:
    spec = SPECS[request.param]
    fake = await spec.fake().start()
    r = Rig(request.param, spec, fake, None)  # type: ignore[arg-type]
    r.channel = r.rebuild()
    try:
        yield r
    finally:
        await r.channel.close()
        await fake.stop()


def step(**kw: Any) -> RenderInput:
    base: dict[str, Any] = {
        "notification_id": NID, "step_no": STEP, "channel": "mail", "kind": "digest",
        "user_id": "u-7", "params": {}, "created_at": 1_790_000_000_000,
        "expires_at": 1_790_086_400_000, "address": TO, "locale": "en",
        "now": 1_790_000_001_000, "transactional": False, "unsubscribe_url": UNSUBSCRIBE,
        "content": {"subject": "Your weekly digest", "text": f"3 new items {MARK}",
                    "html": f"<p>3 new items {MARK}</p>"}}
    return RenderInput(**{**base, **kw})


async def send(channel: Channel, s: RenderInput | None = None) -> Outcome:
    """Render, freeze as the sender does (JSON with sorted keys) and send what reads back."""
    s = s or step()
    rendered = channel.render(s)
    payload = json.loads(json.dumps(rendered.payload, sort_keys=True))
    outcome = await channel.send(Message(f"{s.notification_id}:{s.step_no}",
                                         rendered.destination, payload))
    return outcome


def clean(rig: Rig, outcome: Outcome, address: str = TO) -> None:
    said = outcome.detail if isinstance(outcome, Sent) else getattr(outcome, "reason", "")
    for secret in (*rig.spec.secrets, address, MARK, "3 new items"):
        assert secret not in (said or ""), f"{outcome!r} carries {secret!r}"


async def test_a_sent_email_carries_the_headers_the_key_and_the_kind(rig: Rig) -> None:
    outcome = await send(rig.channel)
    assert isinstance(outcome, Sent) and outcome.provider_ref in rig.fake.sent
    clean(rig, outcome)
    took = rig.spec.carried(rig.fake.sent[outcome.provider_ref])
    assert (took.to, took.subject) == (TO, "Your weekly digest")
    assert took.text == f"3 new items {MARK}"
    assert took.headers["List-Unsubscribe"] == f"<{UNSUBSCRIBE}>"
    assert took.headers["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert (took.key, took.tag) == (KEY, "digest")


async def test_transactional_mail_carries_no_list_unsubscribe(rig: Rig) -> None:
    outcome = await send(rig.channel, step(transactional=True))
    assert isinstance(outcome, Sent)
    took = rig.spec.carried(rig.fake.sent[outcome.provider_ref])
    assert "List-Unsubscribe" not in took.headers and took.key == KEY


async def test_a_retry_of_the_frozen_payload_sends_the_same_body(rig: Rig) -> None:
    first, again = await send(rig.channel), await send(rig.channel)
    assert isinstance(first, Sent) and isinstance(again, Sent)
    assert len(rig.fake.seen) == 2 and rig.fake.seen[0].body == rig.fake.seen[1].body


async def test_an_address_the_provider_refuses_is_rejected(rig: Rig) -> None:
    outcome = await send(rig.channel, step(address=BAD))
    assert isinstance(outcome, Rejected), outcome
    assert rig.fake.sent == {}
    clean(rig, outcome, BAD)


async def test_throttling_is_failed_and_retried(rig: Rig) -> None:
    rig.fake.throttled = True
    outcome = await send(rig.channel)
    assert isinstance(outcome, Failed) and not outcome.final, outcome
    assert outcome.reason.startswith("HTTP 429")
    if rig.name in ("sendgrid", "mailgun"):  # they say when: X-RateLimit-Reset, Retry-After
        assert outcome.retry_after is not None


async def test_an_outage_is_failed_and_retried(rig: Rig) -> None:
    rig.fake.down = True
    outcome = await send(rig.channel)
    assert isinstance(outcome, Failed) and not outcome.final, outcome
    assert outcome.reason.startswith("HTTP 5")
    rig.fake.down = False
    assert isinstance(await send(rig.channel), Sent)  # it comes back: the retry goes


async def test_bad_credentials_are_failed_never_rejected_and_never_shown(rig: Rig) -> None:
    channel = rig.rebuild(**rig.spec.wrong)
    try:
        outcome = await send(channel)
    finally:
        await channel.close()
    assert isinstance(outcome, Failed) and not outcome.final, outcome
    assert outcome.reason.startswith(("HTTP 401", "HTTP 403")), outcome
    assert "refused our" in outcome.reason
    clean(rig, outcome)
    assert rig.fake.sent == {}


async def test_a_connection_lost_after_the_request_is_unknown(rig: Rig) -> None:
    rig.fake.drop = True
    outcome = await send(rig.channel)
    assert isinstance(outcome, Unknown), outcome
    assert len(rig.fake.seen) == 1


def test_every_email_api_type_declares_email_and_the_example_documents_it() -> None:
    from pathlib import Path

    from notifyd.core.contacts import EMAIL

    example = (Path(__file__).resolve().parents[2] / "notifyd.example.toml").read_text()
    for name in SPECS:
        assert (TYPES[name].contact, TYPES[name].medium) == (EMAIL, "email")
        assert f'type = "{name}"' in example
