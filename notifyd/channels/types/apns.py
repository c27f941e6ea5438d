"""The apns channel's declaration: the team, the token signing key (.p8), the app's topic, the
environment (the adapter: channels/apns.py), and the key read and checked: the adapter signs
its provider tokens with it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import loads_with, url_problem
from notifyd.core.contacts import APNS
from notifyd.core.fields import Checked, doc, sensitive

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import ec

HOSTS = {"production": "https://api.push.apple.com",
         "sandbox": "https://api.sandbox.push.apple.com"}
TEN = re.compile(r"[A-Z0-9]{10}")  # a Team ID and a Key ID are ten upper-case letters or digits
TOPIC_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,154}")  # a bundle ID (reverse DNS)


def load_key(pem: str) -> ec.EllipticCurvePrivateKey:
    """The .p8 file's P-256 private key; ValueError naming what is wrong, never the key."""
    # cryptography only when a config has an apns channel
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    try:
        key = serialization.load_pem_private_key(pem.strip().encode(), password=None)
    except (ValueError, TypeError):  # the library's message may quote the key: not kept
        raise ValueError("is not a PEM private key (the .p8 file Apple gave)") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
        raise ValueError("is not a P-256 key: APNs signs with ES256")
    return key



def _base_problem(base_url: str) -> str | None:
    if not base_url:
        return None
    if urlsplit(base_url).scheme != "https":
        return "must be an https URL: APNs is spoken over TLS only"
    return url_problem(base_url)


@dataclass(frozen=True)
class ApnsSettings(Checked):
    team_id: str = doc("Your Apple Developer Team ID (ten characters), the provider token's "
                       "issuer.", "", nonempty=True, pattern=TEN,
                       says="must be the ten-character Team ID")
    key_id: str = doc("The Key ID of the APNs authentication key (ten characters).", "",
                      nonempty=True, pattern=TEN, says="must be the ten-character Key ID")
    private_key: str = sensitive(
        "The APNs authentication key: the text of the .p8 file Apple gave with the Key ID "
        "(a secret).", "", nonempty=True,
        check=loads_with(load_key))
    topic: str = doc("The app's bundle ID, sent as apns-topic.", "", nonempty=True,
                     pattern=TOPIC_RE, says="must be the app's bundle ID (com.example.app)")
    environment: str = doc('"production" (api.push.apple.com: App Store and TestFlight builds) '
                           'or "sandbox" (api.sandbox.push.apple.com: builds run from Xcode). '
                           "A device token works in one only: a token of the other answers "
                           "BadDeviceToken and its device is disabled.", "production",
                           choices=tuple(HOSTS))
    sound: str = doc('The sound the alert plays: "default", a sound file in the app bundle, or '
                     "empty for none.", "", pattern=re.compile(r"[\w .-]{1,100}"),
                     says="must be a sound name (letters, digits, spaces, . - _)")
    base_url: str = doc("Where APNs is, over TLS (empty: the environment's host; tests and "
                        "gateways point elsewhere).", "", check=_base_problem)

    def origin(self) -> str:
        return (self.base_url or HOSTS[self.environment]).rstrip("/")


TYPE = ChannelType("apns", "pushes to the user's Apple devices (APNs, token-based, HTTP/2)",
                   ApnsSettings, APNS, Adapter("notifyd.channels.apns"), medium="push")
