"""Signing in to the console and out of it, in-process over the real engine and store: a session
ends with its sign-out (after a restart too), with the password it was opened with (a reload
that changes or removes it), and with an admin key that may no longer sign in; failed sign-ins
are limited per address and per tenant, with a backoff, and a browser that signed in before
passes both; the form refuses a post it did not make (login CSRF), and the password opens no
tenant there is not. The clock is the fake one: every wait is the clock moved on.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientResponse, web
from aiohttp.test_utils import TestClient, TestServer
from stack_support import Stack, stack
from test_console import admin_key, cookie_header, sign_in
from test_people import SETTINGS

from notifyd.domain import signed
from notifyd.http.app import make_app
from notifyd.http.auth import CACHE_MS, KeyCache
from notifyd.http.console import session as console_session
from notifyd.http.console.signins import BACKOFF_MAX_MS, TENANT_WINDOW_MS
from notifyd.http.kit import Context

PASSWORD = "correct horse battery staple"
WRONG = "incorrect horse battery"
FROM = "X-Test-Remote"  # the address a request comes from, as the test app takes it


@web.middleware
async def remote_from_header(request: web.Request, handler: Any) -> web.StreamResponse:
    """The peer's address as the test names it: 200 addresses from one test client."""
    address = request.headers.get(FROM)
    return await handler(request.clone(remote=address) if address else request)


@asynccontextmanager
async def console(tmp_path: Path) -> AsyncIterator[Stack]:
    async with stack(tmp_path, {**SETTINGS, "console": {"password": PASSWORD}}) as s:
        app = make_app(s.ctx, [remote_from_header])
        async with TestClient(TestServer(app)) as client:
            yield dataclasses.replace(s, client=client)


async def password_in(s: Stack, password: str = PASSWORD, tenant: str = "default",
                      address: str = "10.0.0.1",
                      cookies: dict[str, str] | None = None) -> ClientResponse:
    """A sign-in from `address` (with the password, unless another is given)."""
    return await sign_in(s, password, tenant, cookies, {FROM: address})


def session_of(r: ClientResponse) -> dict[str, str]:
    assert r.status == 303, r.status
    return {"Cookie": f"notifyd_console={r.cookies['notifyd_console'].value}"}


def device_of(r: ClientResponse) -> dict[str, str]:
    assert r.status == 303, r.status
    return {"notifyd_device": r.cookies["notifyd_device"].value}


async def signed_in(s: Stack, cookie: dict[str, str], client: TestClient[Any, Any] | None = None
                    ) -> bool:
    r = await (client or s.client).get("/console", headers=cookie, allow_redirects=False)
    assert r.status in (200, 303), r.status
    return r.status == 200


def reload_with(s: Stack, **console: Any) -> None:
    """What a SIGHUP does to the requests after it: the app reads the new config."""
    cfg = s.ctx.cfg
    s.ctx.use(dataclasses.replace(cfg, console=dataclasses.replace(cfg.console, **console)),
              s.ctx.ingest, s.ctx.health)


# --- a session ends ----------------------------------------------------------------------------


async def test_a_signed_out_session_stays_ended_after_a_restart(tmp_path: Path) -> None:
    async with console(tmp_path) as s:
        cookie = session_of(await password_in(s))
        copy = dict(cookie)  # what someone who took the cookie holds
        other = session_of(await password_in(s))
        page = await s.client.get("/console/dead", headers=cookie)
        csrf = console_csrf(await page.text())
        out = await s.client.post("/console/sign-out", headers=cookie, data={"csrf": csrf},
                                  allow_redirects=False)
        assert out.status == 303 and out.cookies["notifyd_console"].value == ""
        assert not await signed_in(s, copy)
        assert await signed_in(s, other)  # another session of the same password goes on
        # A restart: a new app, key cache and limits over the same database.
        ctx = Context(s.ctx.cfg, s.e.ingest, KeyCache(s.e.store, s.e.clock), s.e.clock,
                      link_key=s.ctx.link_key)
        async with TestClient(TestServer(make_app(ctx))) as restarted:
            assert not await signed_in(s, copy, restarted)
            assert await signed_in(s, other, restarted)


def console_csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def answer(page: str) -> str:
    """A page as it answers the attempt: the form's token is each browser's own."""
    return re.sub(r'name="csrf" value="[^"]+"', "", page)


async def test_a_changed_or_removed_password_ends_its_sessions(tmp_path: Path) -> None:
    async with console(tmp_path) as s:
        by_password = session_of(await password_in(s))
        by_key = session_of(await sign_in(s, await admin_key(s)))
        reload_with(s, password="a brand new password")
        assert not await signed_in(s, by_password)
        assert await signed_in(s, by_key)  # an admin key's session is not the password's
        assert (await password_in(s)).status == 401  # the old password opens nothing
        fresh = session_of(await password_in(s, "a brand new password"))
        reload_with(s, password="")
        assert not await signed_in(s, fresh)
        assert await signed_in(s, by_key)
        assert (await password_in(s, "a brand new password")).status == 401


async def test_a_password_session_from_before_sessions_named_their_password_ends(
        tmp_path: Path) -> None:
    async with console(tmp_path) as s:
        assert s.ctx.link_key is not None
        made = signed.Session("default", "password", None, s.e.now // 1000 + 3600, "n" * 22)
        old = signed.make_session(console_session.key_of(s.ctx.link_key), made)
        assert not await signed_in(s, {"Cookie": f"notifyd_console={old}"})


async def test_a_session_ends_when_its_key_may_no_longer_sign_in(tmp_path: Path) -> None:
    """A key made with --kinds may not sign in (it never holds admin): a session it opened
    before that rule ends too."""
    async with console(tmp_path) as s:
        await admin_key(s)
        cookie = session_of(await sign_in(s, await admin_key(s, "ops2")))
        await s.e.store.backend.write(lambda tx: tx.run(
            "UPDATE api_keys SET kinds = ? WHERE name = 'ops2'", ('["report"]',)))
        s.e.clock.advance(CACHE_MS / 1000)
        assert not await signed_in(s, cookie)


# --- the limits --------------------------------------------------------------------------------


async def test_guesses_from_many_addresses_stop_at_the_tenants_limit(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with console(tmp_path) as s:
        caplog.set_level(logging.WARNING, "notifyd.console")
        operator = device_of(await password_in(s, address="10.9.9.9"))
        most = s.ctx.cfg.console.max_failed_sign_ins_per_tenant
        statuses = [(await password_in(s, WRONG, address=f"10.1.{i // 5}.{i}")).status
                    for i in range(200)]
        assert statuses.count(401) == most and statuses.count(429) == 200 - most
        right = await password_in(s, address="10.2.0.1")  # checked? no: nor any other
        assert right.status == 429 and "notifyd_console" not in right.cookies
        assert "try again in 1 s" in await right.text() and right.headers["Retry-After"] == "1"
        # The operator's browser signed in before: it passes, from any address.
        assert (await password_in(s, address="10.2.0.2", cookies=operator)).status == 303
        lines = [r.getMessage() for r in caplog.records if r.name == "notifyd.console"]
        assert sum("failed password sign-ins to tenant default" in ln for ln in lines) == 1


async def test_the_tenants_wait_doubles_with_each_failure_and_ends(tmp_path: Path) -> None:
    async with console(tmp_path) as s:
        most = s.ctx.cfg.console.max_failed_sign_ins_per_tenant
        for i in range(most):
            assert (await password_in(s, WRONG, address=f"10.3.0.{i}")).status == 401
        waits = []
        for i in range(12):  # 1 + 2 + ... + 512 s, then the most: all within the hour
            refused = await password_in(s, WRONG, address=f"10.4.0.{i}")
            assert refused.status == 429
            wait = int(refused.headers["Retry-After"])
            waits.append(wait)
            s.e.clock.advance(wait - 0.5)
            assert (await password_in(s, address=f"10.5.0.{i}")).status == 429
            s.e.clock.advance(0.5)
            assert (await password_in(s, WRONG, address=f"10.6.0.{i}")).status == 401
        assert waits == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, BACKOFF_MAX_MS // 1000,
                         BACKOFF_MAX_MS // 1000]
        s.e.clock.advance(TENANT_WINDOW_MS / 1000)  # an hour without failures: it is over
        assert (await password_in(s, address="10.8.0.1")).status == 303


async def test_a_locked_address_lets_only_a_browser_that_signed_in_before_through(
        tmp_path: Path) -> None:
    """The per-address lockout answers a guesser's right password as its wrong ones, unchecked;
    the operator's own browser, which signed in with this password before, is checked."""
    async with console(tmp_path) as s:
        operator = device_of(await password_in(s))
        most = s.ctx.cfg.console.max_failed_sign_ins
        for _ in range(most):
            assert (await password_in(s, WRONG)).status == 401
        right, wrong = await password_in(s), await password_in(s, WRONG)
        assert right.status == wrong.status == 429
        assert answer(await right.text()) == answer(await wrong.text())
        assert (await password_in(s, cookies=operator)).status == 303
        # Its own failures lock that browser alone.
        for _ in range(most):
            assert (await password_in(s, WRONG, cookies=operator)).status == 401
        locked = await password_in(s, cookies=operator)
        assert locked.status == 429 and "from this browser" in await locked.text()
        assert (await password_in(s, address="10.0.0.2")).status == 303
        s.e.clock.advance(60)
        assert (await password_in(s, cookies=operator)).status == 303


async def test_a_browser_trusted_for_an_old_password_or_another_tenant_is_not(
        tmp_path: Path) -> None:
    async with console(tmp_path) as s:
        await s.e.store.create_tenant("acme")
        operator = device_of(await password_in(s))
        for _ in range(s.ctx.cfg.console.max_failed_sign_ins):
            await password_in(s, WRONG)
        assert (await password_in(s, tenant="acme", cookies=operator)).status == 429
        reload_with(s, password="a brand new password")
        assert (await password_in(s, "a brand new password", cookies=operator)).status == 429
        forged = {"notifyd_device": signed.make_device(b"k" * 32, signed.Device(
            "default", None, "n" * 22, s.e.now // 1000 + 60))}
        assert (await password_in(s, "a brand new password", cookies=forged)).status == 429


# --- the form and the tenant -------------------------------------------------------------------


async def test_a_sign_in_the_form_did_not_make_is_refused(tmp_path: Path) -> None:
    """Login CSRF: another site's page posting the form would sign the visitor in to the
    attacker's session. The form's token is bound to a SameSite cookie the page set."""
    async with console(tmp_path) as s:
        form = await s.client.get("/console/sign-in")
        cookie = form.cookies["notifyd_sign_in"]
        assert cookie["samesite"] == "Strict" and cookie["httponly"]
        assert cookie["path"] == "/console/sign-in"
        token = console_csrf(await form.text())
        held = {"notifyd_sign_in": cookie.value}
        other = await s.client.get("/console/sign-in")  # another browser's form
        theirs = console_csrf(await other.text())
        for headers, data in (({}, {}), ({}, {"csrf": token}),
                              (cookie_header(held), {}),
                              (cookie_header(held), {"csrf": theirs}),
                              (cookie_header({"notifyd_sign_in": "x"}), {"csrf": token})):
            r = await s.client.post("/console/sign-in", allow_redirects=False, headers=headers,
                                    data={"credential": PASSWORD, **data})
            assert r.status == 403 and "notifyd_console" not in r.cookies, (headers, data)
            assert "csrf_failed" in await r.text()
        r = await s.client.post("/console/sign-in", allow_redirects=False,
                                headers=cookie_header(held),
                                data={"credential": PASSWORD, "csrf": token})
        assert r.status == 303 and "notifyd_console" in r.cookies


async def test_the_password_opens_no_tenant_there_is_not(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with console(tmp_path) as s:
        caplog.set_level(logging.WARNING, "notifyd.console")
        nowhere = await password_in(s, tenant="nowhere")
        wrong = await password_in(s, WRONG, address="10.0.0.3")
        assert nowhere.status == wrong.status == 401 and "notifyd_console" not in nowhere.cookies
        assert answer(await nowhere.text()) == answer(await wrong.text())  # no tenant told
        assert any("no tenant 'nowhere'" in r.getMessage() for r in caplog.records)
        await s.e.store.create_tenant("nowhere")
        assert (await password_in(s, tenant="nowhere", address="10.0.0.4")).status == 303
