"""The fcm channel's declaration: its Google service account key file, project and endpoints
(the adapter: channels/fcm.py), and the key file read and checked: the adapter signs with it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from notifyd.channels.base import Adapter, ChannelType
from notifyd.channels.types.checks import HTTP_URL, http_url, parse_json
from notifyd.core.contacts import FCM
from notifyd.core.fields import Checked, Problems, doc

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

DEFAULT_BASE_URL = "https://fcm.googleapis.com"
DEFAULT_TOKEN_URL = "https://oauth2.googleapis.com/token"
PROJECT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.:-]{0,99}$")  # ids, numbers, domain:scoped


class KeyFileError(ValueError):
    """The key file cannot be used; the message names what is wrong, never what the file holds."""


@dataclass(frozen=True, repr=False)  # repr=False: the key must never reach a log line
class ServiceAccount:
    client_email: str
    private_key: rsa.RSAPrivateKey
    private_key_id: str | None
    token_uri: str | None
    project_id: str | None

    @classmethod
    def load(cls, path: str) -> ServiceAccount:
        # cryptography only when a config has an fcm channel
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        try:
            raw = Path(path).read_bytes()
        except OSError as e:
            raise KeyFileError(f"cannot read the key file ({type(e).__name__})") from None
        data = parse_json(raw)
        if not isinstance(data, dict):
            raise KeyFileError("the key file is not a JSON object")
        if data.get("type", "service_account") != "service_account":
            raise KeyFileError("the key file is not a service account key")
        email, pem = data.get("client_email"), data.get("private_key")
        if not isinstance(email, str) or not email:
            raise KeyFileError("the key file has no client_email")
        if not isinstance(pem, str) or not pem:
            raise KeyFileError("the key file has no private_key")
        try:
            key = serialization.load_pem_private_key(pem.encode(), password=None)
        except (ValueError, TypeError):  # the library's message may quote the key: not kept
            key = None
        if not isinstance(key, rsa.RSAPrivateKey):
            raise KeyFileError("the key file's private_key is not an RSA private key in PEM")
        return cls(email, key, _opt_str(data, "private_key_id"), _opt_str(data, "token_uri"),
                   _opt_str(data, "project_id"))


def _opt_str(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    return value if isinstance(value, str) and value else None


@dataclass(frozen=True)
class FcmSettings(Checked):
    service_account_file: str = doc(
        "Path to the Google service account JSON key (client_email, private_key, token_uri, "
        "project_id). A secret: keep the file readable by notifyd alone.", "")
    project_id: str = doc("The Firebase project id (default: the key file's project_id).", "")
    base_url: str = doc("The FCM API (default: the real API; tests and proxies point elsewhere).",
                        DEFAULT_BASE_URL)
    token_url: str = doc("The OAuth 2.0 token endpoint (default: the key file's token_uri, "
                         "normally https://oauth2.googleapis.com/token).", "")

    def rules(self) -> Problems:
        """Every key is read with the key file: without one, nothing else can be judged."""
        if not self.service_account_file:
            return [("service_account_file",
                     "an fcm channel needs the path to a Google service account JSON key")]
        try:
            account = ServiceAccount.load(self.service_account_file)
        except KeyFileError as e:
            return [("service_account_file", str(e))]
        out = []
        project = self.project_id or account.project_id
        if not project:
            out.append(("project_id", "not set, and the key file names no project_id"))
        elif not PROJECT_RE.match(project):
            out.append(("project_id", "is not a Firebase project id"))
        if not http_url(self.base_url):
            out.append(("base_url", HTTP_URL))
        if not http_url(self.token_url or account.token_uri or DEFAULT_TOKEN_URL):
            out.append(("token_url", "must be an http(s) URL with a host (or the key file's "
                                     "token_uri must be one)"))
        return out


TYPE = ChannelType("fcm", "pushes to the user's Firebase Cloud Messaging tokens (HTTP v1 API)",
                   FcmSettings, FCM, Adapter("notifyd.channels.fcm"), medium="push")
