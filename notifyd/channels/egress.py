"""Where an HTTP channel's call goes out: straight to the provider, or through the egress proxy
([egress] https_proxy / http_proxy / no_proxy; config/load.py fills each key the config leaves
empty from HTTPS_PROXY / HTTP_PROXY / NO_PROXY). channels/wire.py asks `route` for every call.

A proxy is an http:// one: an https origin is reached through a CONNECT tunnel, TLS running end to
end through it (the proxy sees the host name, never the request); an http:// origin's request is
handed to the proxy whole. Its user:password (percent-decoded) go as Proxy-Authorization: Basic,
never in a repr or an error. NO_PROXY is read as curl reads it: entries apart by commas or
spaces; `*` alone bypasses every host; a name bypasses itself and every name under it (a leading
dot changes nothing); an IP address bypasses itself and a CIDR block every address in it, and an
address is matched by those alone; case and a trailing dot do not count.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote, urlsplit

DEFAULT_PORT = 80


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    authorization: str | None = field(default=None, repr=False)  # "Basic ..." when it has a user


@dataclass(frozen=True)
class Egress:
    """The proxy for https and for http origins (None: straight out), and the hosts that bypass
    it."""

    https: Proxy | None = None
    http: Proxy | None = None
    no_proxy: tuple[str, ...] = ()

    @classmethod
    def of(cls, https_proxy: str, http_proxy: str, no_proxy: Iterable[str]) -> Egress:
        """From the [egress] keys; ValueError (naming no value) for a proxy URL that is not one."""
        return cls(parse_proxy(https_proxy) if https_proxy else None,
                   parse_proxy(http_proxy) if http_proxy else None,
                   tuple(part for rule in no_proxy for part in re.split(r"[\s,]+", rule) if part))

    def route(self, tls: bool, host: str) -> Proxy | None:
        """The proxy a call to `host` goes through, or None for a direct connection."""
        proxy = self.https if tls else self.http
        if proxy is None or bypassed(host, self.no_proxy):
            return None
        return proxy


DIRECT = Egress()


def parse_proxy(url: str) -> Proxy:
    """An http:// proxy URL (the scheme may be left out, as curl allows; the port defaults to
    80); ValueError says what is wrong without echoing it, since it may hold a password."""
    if "://" not in url:
        url = f"http://{url}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("is not a valid proxy URL") from None
    if parts.scheme.lower() != "http":
        raise ValueError("must be an http:// proxy (https:// and socks proxies are not "
                         "supported)")
    if not parts.hostname or any(ord(c) <= 32 or ord(c) == 127 for c in url):
        raise ValueError("is not a valid proxy URL (http://[user:password@]host[:port])")
    authorization = None
    if parts.username is not None:
        user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(user.encode()).decode("ascii")
    return Proxy(parts.hostname, port or DEFAULT_PORT, authorization)


@lru_cache(maxsize=1024)
def bypassed(host: str, rules: tuple[str, ...]) -> bool:
    """Whether NO_PROXY's `rules` send `host` straight out."""
    host = host.strip("[]").rstrip(".").lower()
    ip = _ip(host)
    for raw in rules:
        rule = raw.strip().lower()
        if rule == "*":
            return True
        if "/" in rule:
            try:
                network = ipaddress.ip_network(rule.strip("[]"), strict=False)
            except ValueError:
                continue
            if ip is not None and ip.version == network.version and ip in network:
                return True
            continue
        rule_ip = _ip(rule.strip("[]"))
        if rule_ip is not None:
            if ip == rule_ip:
                return True
            continue
        name = rule.strip(".")
        if ip is None and name and (host == name or host.endswith(f".{name}")):
            return True
    return False


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None
