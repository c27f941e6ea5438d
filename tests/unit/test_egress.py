"""Which calls go through the egress proxy (channels/egress.py): NO_PROXY read as curl reads it,
the proxy's URL read as curl reads it, its password never shown."""

from __future__ import annotations

import base64

import pytest

from notifyd.channels.egress import DIRECT, Egress, Proxy, bypassed, parse_proxy


@pytest.mark.parametrize(("host", "rules", "direct"), [
    ("api.twilio.com", ("*",), True),
    ("api.twilio.com", ("twilio.com",), True),  # a name: itself and every name under it
    ("api.twilio.com", (".twilio.com",), True),  # a leading dot changes nothing
    ("twilio.com", (".twilio.com",), True),
    ("API.Twilio.COM.", ("twilio.com.",), True),  # case and a trailing dot do not count
    ("nottwilio.com", ("twilio.com",), False),  # a name, not a string's tail
    ("api.twilio.com", (" example.org ", "", "twilio.com"), True),  # spaces, empty entries
    ("10.1.2.3", ("10.0.0.0/8",), True),  # a CIDR block
    ("10.1.2.3", ("10.1.2.3",), True),
    ("10.1.2.3", ("10.1.2.4", "11.0.0.0/8"), False),
    ("127.0.0.1", (".0.1", "0.0.1"), False),  # an address is matched by addresses alone
    ("::1", ("::1",), True),
    ("[::1]", ("[::1]",), True),
    ("fd00::5", ("fd00::/8",), True),
    ("fd00::5", ("10.0.0.0/8",), False),
    ("api.twilio.com", ("*.twilio.com",), False),  # curl has no wildcards but "*" alone
    ("api.twilio.com", (), False),
])
def test_no_proxy_is_read_as_curl_reads_it(host: str, rules: tuple[str, ...],
                                           direct: bool) -> None:
    assert bypassed(host, rules) is direct


def test_each_scheme_has_its_proxy_and_no_proxy_bypasses_both() -> None:
    egress = Egress.of("http://tls-proxy:3128", "plain-proxy", [" internal.example other.example"])
    assert egress.route(True, "api.resend.com") == Proxy("tls-proxy", 3128)
    assert egress.route(False, "hooks.example.com") == Proxy("plain-proxy", 80)
    assert egress.route(True, "x.internal.example") is None
    assert egress.route(True, "other.example") is None  # curl splits on spaces too
    assert Egress.of("http://p:1", "", ()).route(False, "hooks.example.com") is None
    assert DIRECT.route(True, "api.resend.com") is None


def test_credentials_become_proxy_authorization_and_are_never_shown() -> None:
    proxy = parse_proxy("http://egress%40corp:p%3Ass%20word@proxy.corp:8080/")
    assert (proxy.host, proxy.port) == ("proxy.corp", 8080)
    assert proxy.authorization == "Basic " + base64.b64encode(b"egress@corp:p:ss word").decode()
    assert "word" not in repr(proxy) and "cDpz" not in repr(Egress(proxy))


@pytest.mark.parametrize(("url", "problem"), [
    ("https://proxy:3128", "must be an http:// proxy"),
    ("socks5://u:hunter2@proxy:1080", "must be an http:// proxy"),
    ("http://proxy:99999", "is not a valid proxy URL"),
    ("http://:3128", "is not a valid proxy URL"),
    ("http://u:hunter2@pro xy:3128", "is not a valid proxy URL"),
])
def test_a_proxy_url_that_is_not_one_is_refused_without_echoing_it(url: str,
                                                                    problem: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_proxy(url)
    assert str(e.value).startswith(problem) and "hunter2" not in str(e.value)
