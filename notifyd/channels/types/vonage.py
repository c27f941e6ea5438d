"""The vonage channel's declaration: the Vonage application that sends (its id and private key),
the sender, the API's region (the adapter: channels/vonage.py); and the error codes that say a
number is dead, which the vonage webhook's parser reads too."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import loads_with, url_problem
from notifyd.core.contacts import PHONE
from notifyd.core.fields import Checked, doc, sensitive

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

DEFAULT_BASE_URL = "https://api.nexmo.com"
APPLICATION_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# A number in E.164 (the + is dropped on the wire: Vonage wants digits only) or an alphanumeric
# sender ID (up to 11 characters, one letter at least).
SENDER_RE = re.compile(r"\+?[1-9][0-9]{6,14}|(?=[A-Za-z0-9 ]*[A-Za-z])[A-Za-z0-9 ]{1,11}")
# Messages API error codes (https://developer.vonage.com/api-errors/messages) that say the number
# itself cannot take SMS: its address is suppressed. 1050 number barred, 1170 invalid or missing
# msisdn, 1190 absent subscriber (permanent), 1240 illegal number.
DEAD_NUMBER = {"1050": "the number is barred", "1170": "not a valid number",
               "1190": "the number is permanently unreachable", "1240": "an illegal number"}


def load_key(pem: str) -> rsa.RSAPrivateKey:
    """The application's RSA private key; ValueError naming what is wrong, never the key."""
    # cryptography only when a config has a vonage channel
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        key = serialization.load_pem_private_key(pem.strip().encode(), password=None)
    except (ValueError, TypeError):  # the library's message may quote the key: not kept
        raise ValueError("is not a PEM private key (the private.key Vonage gave the "
                         "application)") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("is not an RSA key: Vonage application tokens are RS256")
    return key



@dataclass(frozen=True)
class VonageSettings(Checked):
    application_id: str = doc("The Vonage application (with Messages enabled) that sends, a "
                              "UUID; its status webhook is the vonage webhook.", "",
                              nonempty=True, pattern=APPLICATION_RE,
                              says="must be the application's id (a lower-case UUID)")
    private_key: str = sensitive("The application's private key, the text of the private.key "
                                 "Vonage gave it (a secret).", "", nonempty=True,
                                 check=loads_with(load_key))
    from_number: str = doc("The sender: a Vonage number in E.164 or an alphanumeric sender ID "
                           "where the destination country allows one.", "", nonempty=True,
                           pattern=SENDER_RE, says="must be an E.164 number or an alphanumeric "
                                                   "sender ID (up to 11, one letter at least)")
    base_url: str = doc("The Messages API's host: https://api.nexmo.com, or a region's "
                        "(https://api-eu.vonage.com, https://api-ap.vonage.com); tests point "
                        "elsewhere.", DEFAULT_BASE_URL, check=url_problem)


TYPE = ChannelType("vonage", "sends SMS through Vonage's Messages API (application JWT)",
                   VonageSettings, PHONE, Adapter("notifyd.channels.vonage"), medium="sms")
