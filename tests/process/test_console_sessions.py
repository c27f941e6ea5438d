"""Console sessions in the real daemon, in a subprocess: a session signed out stays ended after a
restart, while another goes on; removing the console password and sending SIGHUP ends every
session it opened. Every wait polls with a deadline.
"""

from __future__ import annotations

import re
import signal
import urllib.error
import urllib.parse
import urllib.request
from http.cookies import SimpleCookie
from pathlib import Path

from engine_support import Daemon

TIMEOUT = 30.0
PASSWORD = "correct horse battery staple"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


OPEN = urllib.request.build_opener(NoRedirect)


def fetch(url: str, cookies: dict[str, str], form: dict[str, str] | None = None
          ) -> tuple[int, str, dict[str, str]]:
    """(status, body, the cookies it set) of a GET, or a form POST."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    request = urllib.request.Request(url, data=data, headers={
        "Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())})
    try:
        with OPEN.open(request, timeout=TIMEOUT) as r:
            status, body, headers = r.status, r.read().decode(), r.headers
    except urllib.error.HTTPError as e:
        status, body, headers = e.code, e.read().decode(), e.headers
    jar: SimpleCookie = SimpleCookie()
    for line in headers.get_all("Set-Cookie") or []:
        jar.load(line)
    return status, body, {name: morsel.value for name, morsel in jar.items()}


def sign_in(d: Daemon) -> dict[str, str]:
    """A password session's cookie, from the sign-in page's own form."""
    status, page, held = fetch(f"{d.url}/console/sign-in", {})
    assert status == 200, page
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert token is not None
    status, body, made = fetch(f"{d.url}/console/sign-in", held, {
        "credential": PASSWORD, "tenant": "default", "csrf": token.group(1)})
    assert status == 303, body
    return {"notifyd_console": made["notifyd_console"]}


def signed_in(d: Daemon, session: dict[str, str]) -> bool:
    status, body, _ = fetch(f"{d.url}/console", session)
    assert status in (200, 303), body
    return status == 200


def sign_out(d: Daemon, session: dict[str, str]) -> None:
    status, page, _ = fetch(f"{d.url}/console/dead", session)
    token = re.search(r'name="csrf" value="([^"]+)"', page)
    assert status == 200 and token is not None, page
    status, body, _ = fetch(f"{d.url}/console/sign-out", session, {"csrf": token.group(1)})
    assert status == 303, body


def test_sign_out_holds_across_a_restart_and_a_removed_password_ends_sessions(
        tmp_path: Path) -> None:
    db, config = tmp_path / "notifyd.db", tmp_path / "notifyd.toml"
    config.write_text(f'[console]\npassword = "{PASSWORD}"\n')
    d = Daemon(db, config)
    try:
        gone, kept = sign_in(d), sign_in(d)
        sign_out(d, gone)
        assert not signed_in(d, gone) and signed_in(d, kept)
        assert d.stop() == 0, d.stderr()
        d = Daemon(db, config)
        assert not signed_in(d, gone)  # the sign-out is in the database, not in memory
        assert signed_in(d, kept)
        config.write_text("[console]\n")
        d.signal(signal.SIGHUP)
        d.wait_for_line("reloaded: ")
        assert not signed_in(d, kept)
    finally:
        assert d.stop() == 0, d.stderr()
