"""The webpush channel's declaration: its VAPID key and subject, the push service hosts it may
reach, its TTLs (the adapter: channels/webpush.py)."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass

from notifyd.channels.base import Adapter, ChannelType
from notifyd.core.contacts import WEBPUSH
from notifyd.core.fields import Checked, Problems, doc, sensitive

KNOWN_PUSH_HOSTS = ("fcm.googleapis.com", "updates.push.services.mozilla.com",
                    "*.notify.windows.com", "*.push.apple.com")
MAX_TTL_SEC = 30 * 86400  # autopush refuses more (errno 112); FCM keeps at most 28 days
DEFAULT_TTL_MAX_SEC = 28 * 86400
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
HOST_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$", re.IGNORECASE)
HOST_PATTERN_RE = re.compile(rf"^(?:\*\.)?{_LABEL}(?:\.{_LABEL})*$", re.IGNORECASE)
MAILTO_RE = re.compile(r"^mailto:[^\s<>@,;]+@[^\s<>@,;]+\.[^\s<>@,;.]+$", re.IGNORECASE)
LOCAL_SUFFIXES = (".local", ".localhost", ".internal", ".test", ".invalid")
P256_ORDER = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551


def unb64u(text: str) -> bytes:
    """base64url with or without padding; ValueError for anything else."""
    if not isinstance(text, str) or not re.fullmatch(r"[A-Za-z0-9_-]*={0,2}", text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4))


def vapid_scalar(private_key: str) -> int:
    """The P-256 private scalar of a VAPID key in its base64url raw form (32 bytes)."""
    raw = unb64u(private_key.strip())
    value = int.from_bytes(raw, "big")
    if len(raw) != 32 or not 0 < value < P256_ORDER:
        raise ValueError("not a raw P-256 private key")
    return value


def subject_ok(subject: str) -> bool:
    from yarl import URL  # as the adapter reads URLs; only when a config has a webpush channel

    if MAILTO_RE.match(subject):
        return not subject.lower().endswith(LOCAL_SUFFIXES)
    try:
        url = URL(subject)
    except (ValueError, TypeError):
        return False
    host = (url.host or "").lower()
    return (url.scheme == "https" and "." in host and not host.endswith(LOCAL_SUFFIXES)
            and not any(c.isspace() or c in "<>" for c in subject))


def _key_problem(private_key: str) -> str | None:
    if not private_key:
        return "required (`notifyd vapid generate` makes one)"
    try:
        vapid_scalar(private_key)
    except ValueError:
        return "not a base64url raw P-256 private key"
    return None


def _subject_problem(subject: str) -> str | None:
    if subject_ok(subject):
        return None
    return ("must be mailto:someone@a.domain or an https:// URL on a public domain, without "
            "spaces or <>")


@dataclass(frozen=True)
class WebPushSettings(Checked):
    vapid_private_key: str = sensitive(
        "Secret. The VAPID private key: the raw 32-byte P-256 key as base64url (what `notifyd "
        "vapid generate` prints, with the public key the web page subscribes with).", "",
        check=_key_problem)
    vapid_subject: str = doc(
        "Who runs this sender, for the push services (RFC 8292 sub): mailto:ops@example.com or "
        "https://example.com; Apple refuses localhost and addresses with spaces or <>.", "",
        check=_subject_problem)
    allowed_hosts: tuple[str, ...] = doc(
        "Push service hosts an endpoint may name: exact, or *.domain for its subdomains. A device "
        "elsewhere is skipped: endpoints come from browsers, so from anyone.", KNOWN_PUSH_HOSTS,
        pattern=HOST_PATTERN_RE,
        says="each entry is a host name or *.domain (no scheme, port or path)")
    allow_any_host: bool = doc(
        "Send to an https endpoint on any host (a self-hosted push service); endpoints become "
        "requests this server makes to wherever a subscriber says.", False)
    http_hosts: tuple[str, ...] = doc(
        "Exact hosts that may be reached over plain http (tests, a push service on a private "
        "network); never a public push service.", (), pattern=HOST_RE,
        says="each entry is an exact host name or IPv4 address")
    ttl_max_sec: int = doc(
        "The longest TTL asked of a push service (the step's time to live, capped to this).",
        DEFAULT_TTL_MAX_SEC, ge=0, le=MAX_TTL_SEC)
    vapid_token_sec: int = doc(
        "How long each VAPID token is valid (at most 86400); one is reused for half of it.", 43200,
        ge=60, le=86400, note="RFC 8292: at most 24 h")

    def rules(self) -> Problems:
        if not (self.allowed_hosts or self.http_hosts or self.allow_any_host):
            return [("allowed_hosts", "no push service host is allowed")]
        return []


TYPE = ChannelType("webpush", "Web Push to the user's browsers (RFC 8030/8291/8292, VAPID)",
                   WebPushSettings, WEBPUSH, Adapter("notifyd.channels.webpush"), medium="push")
