"""The preference centre's link in a message, over the real engine, store and SMTP server: it
expires, its key rotates with an overlap, it opens the person's preferences and never their
inbox, a link of an earlier version is refused, and no log line ever holds one.
"""

from __future__ import annotations

import email
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from aiohttp.test_utils import TestClient, TestServer
from stack_support import PUBLIC, Stack, stack
from test_people import DIGEST_TEMPLATES, REPORT_TEMPLATES, SETTINGS, auth, post

from notifyd.domain import signed
from notifyd.engine.render import KEY_EVERY_MS
from notifyd.http.app import make_app
from notifyd.http.auth import CACHE_MS
from notifyd.http.serverlog import AccessLog

TTL_SEC = 90 * 86400  # tokens.preferences_link_ttl_sec's default
LINK = re.compile(rf"{re.escape(PUBLIC)}(/preferences/prefs2\.\S+)")


@asynccontextmanager
async def linked(tmp_path: Path) -> AsyncIterator[Stack]:
    report = {**REPORT_TEMPLATES,
              "email.text.j2": "{{ what }}\nPrefs: {{ preferences_url }}\n"
                               "Stop: {{ unsubscribe_url }}\n"}
    async with stack(tmp_path, SETTINGS, {"report": report,
                                          "social_digest": DIGEST_TEMPLATES}) as s:
        await s.user("ada")
        yield s


async def mailed_link(s: Stack) -> str:
    """The preference link of the next report mailed to Ada: its path."""
    before = len(s.smtp.received)
    await post(s, "report")
    await s.e.run_dry()
    mail = s.smtp.received[before]
    body = email.message_from_bytes(mail.data).get_payload(decode=True).decode()
    found = LINK.search(body)
    assert found is not None, body
    return found.group(1)


async def opened(s: Stack, path: str) -> str | None:
    """The user token the page the link opens holds; None if the link does not work."""
    page = await s.client.get(path)
    text = await page.text()
    if page.status == 404:
        assert "This link does not work" in text
        return None
    assert page.status == 200, text
    found = re.search(r'data-token="([^"]+)"', text)
    assert found is not None
    return found.group(1)


async def test_a_link_opens_the_preferences_and_never_the_inbox(tmp_path: Path) -> None:
    async with linked(tmp_path) as s:
        token = await opened(s, await mailed_link(s))
        assert token is not None
        r = await s.client.get("/v1/users/ada/preferences", headers=auth(s, token))
        assert r.status == 200
        r = await s.client.patch("/v1/users/ada/preferences", headers=auth(s, token),
                                 json={"categories": {"reports": {"email": False}}})
        assert r.status == 200 and (await r.json())["version"] == 1
        for method, path in (("GET", "/v1/users/ada/inbox"),
                             ("GET", "/v1/users/ada/inbox/badge"),
                             ("GET", "/v1/users/ada/inbox/stream"),
                             ("POST", "/v1/users/ada/inbox/read-all"),
                             ("GET", "/v1/users/ada/topics")):
            r = await s.client.request(method, path, headers=auth(s, token))
            body = await r.json()
            assert (r.status, body["error"]["code"]) == (403, "scope_not_allowed"), path
            assert "preferences only" in body["error"]["message"]
        stream = await s.client.get(f"/v1/users/ada/inbox/stream?token={token}")
        assert stream.status == 403  # nor as a query, as EventSource sends it
        # A token the widget's backend minted still reads the inbox.
        minted = await s.client.post("/v1/users/ada/tokens", headers=auth(s), json={})
        whole = (await minted.json())["token"]
        assert (await s.client.get("/v1/users/ada/inbox", headers=auth(s, whole))).status == 200


async def test_a_link_expires(tmp_path: Path) -> None:
    async with linked(tmp_path) as s:
        path = await mailed_link(s)
        s.e.clock.advance(TTL_SEC - 60)
        assert await opened(s, path) is not None
        s.e.clock.advance(60)
        assert await opened(s, path) is None
        assert await opened(s, await mailed_link(s)) is not None  # a newer message's works


async def test_a_rotated_key_opens_old_links_for_the_overlap_then_none(tmp_path: Path) -> None:
    async with linked(tmp_path) as s:
        old = await mailed_link(s)
        await s.e.store.rotate_signing_key(signed.PREFERENCE_LINKS_KEY, 3_600_000)
        s.e.clock.advance(max(CACHE_MS, KEY_EVERY_MS) / 1000)  # a running daemon learns of it
        new = await mailed_link(s)
        fresh = await s.e.store.find_signing_key(signed.PREFERENCE_LINKS_KEY)
        assert fresh is not None and fresh.previous is not None
        token = new.removeprefix("/preferences/")
        signed.read_preferences_link(token, [fresh.secret], s.e.now // 1000, TTL_SEC)
        with pytest.raises(signed.BadToken):  # the new messages are signed with the new key
            signed.read_preferences_link(token, [fresh.previous], s.e.now // 1000, TTL_SEC)
        assert await opened(s, old) is not None and await opened(s, new) is not None
        s.e.clock.advance(3600)
        assert await opened(s, old) is None  # the overlap is over
        assert await opened(s, new) is not None
        await s.e.store.rotate_signing_key(signed.PREFERENCE_LINKS_KEY, 0)
        s.e.clock.advance(CACHE_MS / 1000)
        assert await opened(s, new) is None  # --overlap 0: they end now


async def test_a_link_of_an_earlier_version_is_refused(tmp_path: Path) -> None:
    """Earlier versions signed tenant and user with the links key, for good: such a link was a
    credential that never ended, so it is refused; the person uses a newer message's link."""
    async with linked(tmp_path) as s:
        key = await s.e.store.signing_key(signed.LINKS_KEY)
        old = signed._make(key, signed.OLD_PREFERENCES, {"t": "default", "u": "ada"})
        assert await opened(s, f"/preferences/{old}") is None
        forged = signed.make_preferences_link(key, "default", "ada", s.e.now // 1000 + 60)
        assert await opened(s, f"/preferences/{forged}") is None  # the links key signs none


async def test_a_link_too_far_ahead_is_refused(tmp_path: Path) -> None:
    """One whose expiry is further away than tokens.preferences_link_ttl_sec (the setting was
    lowered since) opens nothing."""
    async with linked(tmp_path) as s:
        key = await s.e.store.signing_key(signed.PREFERENCE_LINKS_KEY)
        far = signed.make_preferences_link(key, "default", "ada", s.e.now // 1000 + 2 * TTL_SEC)
        assert await opened(s, f"/preferences/{far}") is None


async def test_no_log_line_holds_a_link(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The access log names the path of every request: a link in it is cut to its prefix; so
    is a user token in a query, and a link in a message the log channel writes."""
    async with linked(tmp_path) as s:
        path = await mailed_link(s)
        [mail] = s.smtp.received
        unsubscribe = email.message_from_bytes(mail.data)["List-Unsubscribe"].strip("<>")
        unsubscribe = unsubscribe.removeprefix(PUBLIC)
        caplog.set_level(logging.INFO)
        access = logging.getLogger("notifyd.access")
        server = TestServer(make_app(s.ctx))
        await server.start_server(access_log=access, access_log_class=AccessLog)
        async with TestClient(server) as client:
            assert (await client.get(path)).status == 200
            assert (await client.get(path[:-2] + "zz")).status == 404
            assert (await client.get(unsubscribe)).status == 200
            token = (await (await client.post("/v1/users/ada/tokens", headers=auth(s),
                                              json={})).json())["token"]
            await client.get(f"/v1/users/ada/inbox/badge?token={token}")
        lines = [r.getMessage() for r in caplog.records if r.name == "notifyd.access"]
        assert len(lines) == 5, lines
        assert "GET /preferences/prefs2.[redacted] 200" in lines[0]
        assert "GET /v1/unsubscribe/unsub1.[redacted] 200" in lines[2]
        every = "\n".join(r.getMessage() + str(getattr(r, "ids", "")) for r in caplog.records)
        for secret in (path.removeprefix("/preferences/prefs2."),
                       unsubscribe.removeprefix("/v1/unsubscribe/unsub1."),
                       token.removeprefix("nut1.")):
            assert secret[:20] not in every


async def test_the_log_channel_writes_a_message_without_its_links(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    settings = {"channels": {"dev": {"type": "log", "medium": "email"}},
                "kinds": {"report": {"category": "reports", "transactional": False,
                                     "ladder": [{"channel": "dev"}]}}}
    report = {**REPORT_TEMPLATES, "email.text.j2": "Prefs: {{ preferences_url }}\n"}
    async with stack(tmp_path, settings, {"report": report}) as s:
        caplog.set_level(logging.INFO, "notifyd.channel.log")
        await post(s, "report")
        await s.e.run_dry()
        [line] = [r.getMessage() for r in caplog.records if r.name == "notifyd.channel.log"]
        assert f"Prefs: {PUBLIC}/preferences/prefs2.[redacted]" in line, line
