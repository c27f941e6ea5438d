"""The whatsapp channel's declaration: the business phone number, its access token, the Graph
API, and for each kind the approved template it sends (the adapter: channels/whatsapp.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import url_problem
from notifyd.core.contacts import WHATSAPP
from notifyd.core.fields import Checked, Problems, doc, docf, sensitive

DEFAULT_BASE_URL = "https://graph.facebook.com"
DEFAULT_API_VERSION = "v23.0"
NAME_RE = re.compile(r"[a-z0-9_]{1,512}")  # a template's name as WhatsApp Manager makes it
LANGUAGE_RE = re.compile(r"[a-z]{2,3}(?:_[A-Za-z]{2,4})?")  # en, en_US, pt_BR, zh_CN
PARAM_RE = re.compile(r"[a-z_][a-z0-9_]{0,63}")  # a param's name (and a named parameter's)
FORMATS = ("positional", "named")


@dataclass(frozen=True)
class WhatsAppTemplate(Checked):
    """[[channels.NAME.templates]]: the approved template a kind sends."""

    kind: str = doc("The kind ([kinds.KIND]) that sends this template.", "", nonempty=True)
    name: str = doc("The template's name, as approved in WhatsApp Manager.", "", nonempty=True,
                    pattern=NAME_RE, says="must be a template name: a-z, 0-9 and _")
    languages: tuple[str, ...] = doc(
        "The languages the template is approved in (en_US, de, pt_BR): the recipient's locale "
        "picks one (exactly, else by its language alone), and the first is sent to everyone "
        "else.", ("en_US",), pattern=LANGUAGE_RE,
        says="each entry must be a WhatsApp language code such as en_US or de")
    parameters: tuple[str, ...] = doc(
        "The notification's params that fill the body's variables, in order ({{1}}, {{2}}, ...; "
        "or by name with parameter_format = \"named\"). Each must be a text or a number.", (),
        pattern=PARAM_RE, says="each entry must be a param's name (a-z, 0-9, _)")
    parameter_format: str = doc('"positional" ({{1}}, {{2}}) or "named" ({{first_name}}), as '
                                "the template was created.", "positional", choices=FORMATS)

    def rules(self) -> Problems:
        if not self.languages:
            return [("languages", "name at least one language the template is approved in")]
        return []


@dataclass(frozen=True)
class WhatsAppSettings(Checked):
    phone_number_id: str = doc("The business phone number's ID (WhatsApp Manager > API Setup), "
                               "not the number itself.", "", nonempty=True,
                               pattern=re.compile(r"[0-9]{1,30}"),
                               says="must be the phone number ID (digits)")
    access_token: str = sensitive("A system user's access token with whatsapp_business_messaging "
                                  "(a secret).", "", nonempty=True,
                                  pattern=re.compile(r"[A-Za-z0-9_.|-]{20,1024}"),
                                  says="must be an access token (letters and digits)")
    api_version: str = doc("The Graph API version the calls name.", DEFAULT_API_VERSION,
                           pattern=re.compile(r"v[0-9]{1,3}\.[0-9]"),
                           says="must be a Graph API version such as v23.0")
    base_url: str = doc("The Graph API (default: Meta's; tests point elsewhere).",
                        DEFAULT_BASE_URL, check=url_problem)
    templates: tuple[WhatsAppTemplate, ...] = docf(
        "The template each kind sends, a [[channels.NAME.templates]] table each: WhatsApp takes "
        "only approved templates outside the 24 hours after the person last wrote to you, so "
        "notifyd sends templates only, never the kind's chat text.", tuple)

    def template_for(self, kind: str) -> WhatsAppTemplate | None:
        return next((t for t in self.templates if t.kind == kind), None)

    def rules(self) -> Problems:
        kinds = [t.kind for t in self.templates]
        twice = sorted({k for k in kinds if kinds.count(k) > 1})
        return [("templates", f"names the kind {twice[0]!r} twice")] if twice else []


def lacks(settings: Any, channel: str, kind: str) -> str | None:
    """Every kind a WhatsApp channel's ladder sends needs its template."""
    if isinstance(settings, WhatsAppSettings) and settings.template_for(kind) is None:
        return (f"channel {channel!r} has no WhatsApp template for this kind (add a "
                f"[[channels.{channel}.templates]] with kind = {kind!r})")
    return None


TYPE = ChannelType("whatsapp", "sends approved WhatsApp templates (Meta's WhatsApp Cloud API)",
                   WhatsAppSettings, WHATSAPP, Adapter("notifyd.channels.whatsapp"),
                   medium="chat", templates=False, lacks=lacks)
