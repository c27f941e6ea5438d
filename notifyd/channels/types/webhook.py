"""The webhook channel's declaration: its URL and Standard Webhooks secrets (the adapter:
channels/webhook.py). Its secret's form, whsec_ and base64, is also the delivery-receipt and
Resend webhooks' (receipts/providers/)."""

from __future__ import annotations

import base64
from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import http_url
from notifyd.core.fields import Checked, doc, sensitive

NOT_WHSEC = "must be whsec_ followed by base64 (at least 16 bytes)"


def signing_key(secret: str) -> bytes | None:
    """The HMAC key a Standard Webhooks secret (whsec_<base64>) stands for."""
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except ValueError:
        return None
    return key if len(key) >= 16 else None


def whsec_problem(secret: str) -> str | None:
    """What is wrong with a Standard Webhooks secret setting (empty: none is set), or None."""
    return NOT_WHSEC if secret and signing_key(secret) is None else None


def _url_problem(url: str) -> str | None:
    return None if http_url(url) else "a webhook channel needs an http(s) URL with a host"


@dataclass(frozen=True)
class WebhookSettings(Checked):
    url: str = doc("The URL to POST to (http or https).", "", check=_url_problem)
    secret: str = sensitive("Signs every request with Standard Webhooks headers (webhook-id, "
                            "webhook-timestamp, webhook-signature) so the producer can verify "
                            "it with any Standard Webhooks library: whsec_ and base64 (a "
                            "secret). Empty: unsigned.", "", check=whsec_problem)
    previous_secret: str = sensitive("While rotating: the old secret, whose signature is sent "
                                     "too.", "", check=whsec_problem)


TYPE = ChannelType("webhook", "POSTs the notification as JSON to a producer's URL",
                   WebhookSettings, None, Adapter("notifyd.channels.webhook"))
