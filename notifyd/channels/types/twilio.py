"""The twilio channel's declaration: its account, credentials, sender and API (the adapter:
channels/twilio.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import http_url_problem
from notifyd.core.contacts import PHONE
from notifyd.core.fields import Checked, Problems, doc, sensitive

DEFAULT_BASE_URL = "https://api.twilio.com"
ACCOUNT_SID_RE = re.compile(r"^AC[0-9a-fA-F]{32}$")
API_KEY_SID_RE = re.compile(r"^SK[0-9a-fA-F]{32}$")
SERVICE_SID_RE = re.compile(r"^MG[0-9a-fA-F]{32}$")
# A Twilio number (E.164), a short code, or an alphanumeric sender ID (up to 11, one letter).
SENDER_RE = re.compile(
    r"^(?:\+[1-9][0-9]{1,14}|[0-9]{3,8}|(?=[A-Za-z0-9 ]*[A-Za-z])[A-Za-z0-9 ]{1,11})$")


@dataclass(frozen=True)
class TwilioSettings(Checked):
    account_sid: str = doc("The Account SID (AC...) that sends and pays.", "", nonempty=True,
                           pattern=ACCOUNT_SID_RE,
                           says="must be an Account SID: AC and 32 hex digits")
    auth_token: str = sensitive("The account's Auth Token; empty when api_key_sid and "
                                "api_key_secret are set.", "")
    api_key_sid: str = doc("An API key SID (SK...) to authenticate with instead of the Auth "
                           "Token.", "")
    api_key_secret: str = sensitive("The API key's secret.", "")
    from_number: str = doc("The sender: a Twilio number in E.164, a short code or an "
                           "alphanumeric sender ID; or set messaging_service_sid.", "")
    messaging_service_sid: str = doc("A Messaging Service (MG...) that picks the sender; or "
                                     "set from_number.", "")
    base_url: str = doc("The API's base URL (default: Twilio's real API; tests and proxies "
                        "point elsewhere).", DEFAULT_BASE_URL, check=http_url_problem)

    def rules(self) -> Problems:
        out: Problems = []
        if self.api_key_sid or self.api_key_secret:
            if not API_KEY_SID_RE.fullmatch(self.api_key_sid):
                out.append(("api_key_sid", "must be an API key SID: SK and 32 hex digits"))
            if not self.api_key_secret:
                out.append(("api_key_secret", "an API key needs its secret"))
        elif not self.auth_token:
            out.append(("auth_token", "set auth_token, or api_key_sid and api_key_secret"))
        if bool(self.from_number) == bool(self.messaging_service_sid):
            out.append(("from_number", "set exactly one of from_number and messaging_service_sid"))
        elif self.from_number and not SENDER_RE.fullmatch(self.from_number):
            out.append(("from_number", "must be an E.164 number, a short code or an "
                                       "alphanumeric sender ID"))
        elif self.messaging_service_sid and not SERVICE_SID_RE.fullmatch(
                self.messaging_service_sid):
            out.append(("messaging_service_sid", "must be a Messaging Service SID: MG and 32 "
                                                 "hex digits"))
        return out


TYPE = ChannelType("twilio", "sends SMS through Twilio's Messages API", TwilioSettings, PHONE,
                   Adapter("notifyd.channels.twilio"), medium="sms")
