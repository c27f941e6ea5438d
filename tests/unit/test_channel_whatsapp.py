"""The whatsapp adapter against the Cloud API's stand-in (tests/fake_whatsapp.py): template
messages only, the template's language picked from the recipient's locale, its body variables
from the params, the step key in biz_opaque_callback_data.

Covered: the exact request; positional and named parameters; the answers for success, a number
not on WhatsApp (Rejected: the whatsapp address is suppressed), throttling (HTTP 400 with code
130429, as Meta sends it), a bad token, a template WhatsApp does not know, and an outage; render
and config refusals (a kind without a template). No reason carries the number, a parameter or
the token.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from channel_support import render_input
from fake_whatsapp import NOT_ON_WHATSAPP, FakeWhatsApp, graph_error

from notifyd.channels.base import (
    Failed,
    Limits,
    Message,
    Outcome,
    Rejected,
    RenderError,
    RenderInput,
    Sent,
)
from notifyd.channels.types.whatsapp import WhatsAppSettings, WhatsAppTemplate
from notifyd.channels.whatsapp import TYPE, WhatsAppChannel
from notifyd.config import load_config
from notifyd.core.contacts import WHATSAPP
from notifyd.core.errors import ConfigError

PHONE_ID = "106540352242922"
TOKEN = "EAAGm0PX4ZCpsBAKZCq3secretSystemUserToken"
NUMBER = "+14155550123"
LIMITS = Limits(timeout_sec=2.0, max_connections=4)
TEMPLATES = (
    WhatsAppTemplate(kind="payment_failed", name="payment_failed_v2",
                     languages=("en_US", "de", "pt_BR"), parameters=("amount", "invoice")),
    WhatsAppTemplate(kind="welcome", name="welcome", parameters=("first_name",),
                     parameter_format="named"),
)


@dataclass
class Rig:
    fake: FakeWhatsApp
    channel: WhatsAppChannel

    def step(self, kind: str = "payment_failed", address: str = NUMBER,
             **over: Any) -> RenderInput:
        return render_input(**{"step_no": 2, "channel": "wa", "kind": kind, "address": address,
                               "params": {"amount": "9.90 EUR", "invoice": 1009,
                                          "first_name": "Ada"}} | over)

    async def send(self, step: RenderInput) -> Outcome:
        rendered = self.channel.render(step)
        answer = await self.channel.send(Message(f"{step.notification_id}:{step.step_no}",
                                                 rendered.destination, rendered.payload))
        said = answer.reason if isinstance(answer, Failed | Rejected) else ""
        for secret in (NUMBER, NOT_ON_WHATSAPP, "9.90 EUR", "1009", TOKEN):
            assert secret not in said, answer
        return answer


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    approved = {"payment_failed_v2": (("en_US", "de", "pt_BR"), 2), "welcome": (("en_US",), 1)}
    async with FakeWhatsApp(PHONE_ID, TOKEN, approved) as fake:
        settings = WhatsAppSettings(phone_number_id=PHONE_ID, access_token=TOKEN,
                                    base_url=fake.base_url, templates=TEMPLATES)
        assert settings.problems() == []
        channel = WhatsAppChannel("wa", settings, LIMITS)
        try:
            yield Rig(fake, channel)
        finally:
            await channel.close()


async def test_a_template_message_reaches_whatsapp_with_the_step_key(rig: Rig) -> None:
    answer = await rig.send(rig.step())
    [body] = rig.fake.sent
    assert body == {
        "messaging_product": "whatsapp", "recipient_type": "individual", "to": NUMBER,
        "type": "template", "biz_opaque_callback_data": "n_01k9zq3x7c2m4v6b8n:2",
        "template": {"name": "payment_failed_v2",
                     "language": {"policy": "deterministic", "code": "en_US"},
                     "components": [{"type": "body", "parameters": [
                         {"type": "text", "text": "9.90 EUR"}, {"type": "text", "text": "1009"}]}]}}
    assert answer == Sent(rig.fake.wamids[0])


@pytest.mark.parametrize(("locale", "code"), [
    ("de", "de"), ("de-AT", "de"), ("pt-BR", "pt_BR"), ("pt-PT", "en_US"), (None, "en_US")])
async def test_the_recipients_locale_picks_the_templates_language(
        rig: Rig, locale: str | None, code: str) -> None:
    await rig.send(rig.step(locale=locale))
    assert rig.fake.sent[-1]["template"]["language"]["code"] == code


async def test_named_parameters_carry_their_names(rig: Rig) -> None:
    await rig.send(rig.step("welcome"))
    assert rig.fake.sent[0]["template"]["components"] == [{"type": "body", "parameters": [
        {"type": "text", "parameter_name": "first_name", "text": "Ada"}]}]


@pytest.mark.parametrize(("canned", "kind", "reason", "final", "wait"), [
    (None, Rejected, "HTTP 400 WhatsApp 131026: the number cannot take WhatsApp messages", None,
     None),
    (lambda: graph_error(400, 130429, "(#130429) Rate limit hit"), Failed,
     "HTTP 400 WhatsApp 130429: throttled", False, 60.0),
    (lambda: graph_error(401, 190, "Error validating access token"), Failed,
     "HTTP 401 WhatsApp 190: Meta refused the access token", False, None),
    (lambda: graph_error(404, 132001, "Template name does not exist in the translation"),
     Failed, "HTTP 404 WhatsApp 132001: the template was refused", True, None),
    (lambda: graph_error(500, 131000, "Something went wrong", f"for {NUMBER}"), Failed,
     "HTTP 500 WhatsApp 131000", False, None),
])
async def test_each_refusal_maps_to_its_outcome(rig: Rig, canned: Any, kind: type, reason: str,
                                                final: bool | None, wait: float | None) -> None:
    if canned is None:
        answer = await rig.send(rig.step(address=NOT_ON_WHATSAPP))
    else:
        rig.fake.canned = canned()
        answer = await rig.send(rig.step())
    assert isinstance(answer, kind), answer
    assert answer.reason.startswith(reason)  # type: ignore[union-attr]
    if isinstance(answer, Failed):
        assert (answer.final, answer.retry_after) == (final, wait)
    assert TYPE.contact is WHATSAPP  # a rejection suppresses the whatsapp address, not phone


async def test_a_bad_token_is_what_the_stand_in_says_too(rig: Rig) -> None:
    settings = WhatsAppSettings(phone_number_id=PHONE_ID, access_token="EAAG" + "x" * 30,
                                base_url=rig.fake.base_url, templates=TEMPLATES)
    channel = WhatsAppChannel("wa", settings, LIMITS)
    try:
        rendered = channel.render(rig.step())
        answer = await channel.send(Message("n_01k9zq3x7c2m4v6b8n:2", rendered.destination,
                                            rendered.payload))
    finally:
        await channel.close()
    assert isinstance(answer, Failed) and answer.reason.startswith("HTTP 401 WhatsApp 190")


@pytest.mark.parametrize(("step", "part"), [
    ({"kind": "nope"}, "whatsapp"),
    ({"params": {"amount": "9.90 EUR"}}, "whatsapp.invoice"),
    ({"params": {"amount": {"v": 1}, "invoice": 1}}, "whatsapp.amount"),
    ({"address": "0415550123"}, "whatsapp"),
])
async def test_render_refuses_what_whatsapp_would(rig: Rig, step: dict[str, Any],
                                                  part: str) -> None:
    with pytest.raises(RenderError) as refused:
        rig.channel.render(rig.step(**step))
    assert refused.value.template == part


def test_a_ladder_through_whatsapp_needs_the_kinds_template(tmp_path: Path) -> None:
    path = tmp_path / "notifyd.toml"
    channel = {"type": "whatsapp", "phone_number_id": PHONE_ID, "access_token": TOKEN,
               "templates": [{"kind": "paid", "name": "paid"}]}
    path.write_text(tomli_w.dumps({"channels": {"wa": channel}, "kinds": {
        "paid": {"ladder": [{"channel": "wa"}]}, "due": {"ladder": [{"channel": "wa"}]}}}))
    with pytest.raises(ConfigError, match=r"kinds.due.ladder\[0\].channel: channel 'wa' has no "
                                          r"WhatsApp template for this kind"):
        load_config(path)
    channel["templates"] = [{"kind": "paid", "name": "paid"}, {"kind": "paid", "name": "x"}]
    path.write_text(tomli_w.dumps({"channels": {"wa": channel}}))
    with pytest.raises(ConfigError, match="channels.wa.templates: names the kind 'paid' twice"):
        load_config(path)
    channel["templates"] = [{"kind": "paid", "name": "Paid Now", "languages": ["english"]}]
    path.write_text(tomli_w.dumps({"channels": {"wa": channel}}))
    with pytest.raises(ConfigError, match=r"channels.wa.templates\[0\].name: must be a template"):
        load_config(path)
