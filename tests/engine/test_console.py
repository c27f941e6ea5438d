"""The operator console and the preference centre in-process, over the real engine and store:
who may sign in, the session cookie, CSRF and tenants on every form, the limit on failed
sign-ins, console actions recorded where `inspect` shows them, versioned preference saves and the
preference centre's signed link. The same pages in a real browser: tests/process/test_pages.py.
"""

from __future__ import annotations

import email
import logging
import re
from pathlib import Path

import pytest
from aiohttp import ClientResponse
from stack_support import PUBLIC, Stack, stack
from test_people import (
    DIGEST_TEMPLATES,
    REPORT_TEMPLATES,
    SETTINGS,
    auth,
    carried_mention,
    people,
    post,
    put_prefs,
)

from notifyd.core.models import SCOPES
from notifyd.domain.views import timeline
from notifyd.http.auth import hash_key, new_key

ADMIN = SCOPES | {"admin"}


async def admin_key(s: Stack, name: str = "ops", tenant: str = "default",
                    scopes: frozenset[str] = ADMIN) -> str:
    key = new_key()
    await s.e.store.create_key(hash_key(key), name, tenant, (), scopes)
    return key


async def sign_in(s: Stack, credential: str, tenant: str = "") -> ClientResponse:
    return await s.client.post("/console/sign-in", allow_redirects=False, data={
        "credential": credential, "tenant": tenant, "next": "/console/dead"})


async def session(s: Stack, key: str) -> dict[str, str]:
    """The session cookie of a sign-in with `key`, as a header (it is Secure: the test client,
    over plain HTTP, would not send it back by itself)."""
    r = await sign_in(s, key)
    assert r.status == 303, await r.text()
    return {"Cookie": f"notifyd_console={r.cookies['notifyd_console'].value}"}


async def csrf(s: Stack, cookie: dict[str, str], path: str = "/console/dead") -> str:
    page = await s.client.get(path, headers=cookie)
    assert page.status == 200, await page.text()
    found = re.search(r'name="csrf" value="([^"]+)"', await page.text())
    assert found
    return found.group(1)


async def test_an_admin_key_signs_in_with_a_strict_cookie_and_others_do_not(
        tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        r = await sign_in(s, await admin_key(s))
        assert (r.status, r.headers["Location"]) == (303, "/console/dead")
        cookie = r.cookies["notifyd_console"]
        assert cookie["httponly"] and cookie["samesite"] == "Strict"
        assert cookie["secure"]  # server.public_url is https: the daemon is behind TLS
        assert cookie["path"] == "/console"
        refused = await sign_in(s, s.key)  # post, read, resolve, users: no admin
        assert refused.status == 401 and "notifyd_console" not in refused.cookies
        assert "admin scope" in await refused.text()
        nobody = await s.client.get("/console", allow_redirects=False)
        assert (nobody.status, nobody.headers["Location"]) == (303, "/console/sign-in")


async def test_a_session_ends_at_its_expiry_and_with_its_key(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        cookie = await session(s, await admin_key(s))
        assert (await s.client.get("/console", headers=cookie)).status == 200
        s.e.clock.advance(s.ctx.cfg.console.session_ttl_sec * 1000)
        ended = await s.client.get("/console/dead", headers=cookie, allow_redirects=False)
        assert (ended.status, ended.headers["Location"]) == (
            303, "/console/sign-in?next=/console/dead")
        cookie = await session(s, await admin_key(s, "ops2"))
        assert await s.e.store.revoke_key("ops2")
        s.e.clock.advance(10_000)  # the key cache's few seconds
        assert (await s.client.get("/console", headers=cookie,
                                   allow_redirects=False)).status == 303


async def test_forms_refuse_a_missing_csrf_token_and_another_tenants_session(
        tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        nid = await post(s, "report")
        ours = await session(s, await admin_key(s))
        theirs = await session(s, await admin_key(s, "rival", tenant="rival"))
        token, their_token = await csrf(s, ours), await csrf(s, theirs)
        path = f"/console/notifications/{nid}/resolve"
        bare = await s.client.post(path, headers=ours, data={"resolution": "x"})
        assert bare.status == 403 and "csrf_failed" in await bare.text()
        crossed = await s.client.post(path, headers=ours, data={"csrf": their_token})
        assert crossed.status == 403  # another session's token
        other = await s.client.post(path, headers=theirs, data={"csrf": their_token},
                                    allow_redirects=False)
        assert other.status == 404  # another tenant's notification is simply not found
        assert (await s.client.get(f"/console/notifications/{nid}", headers=theirs)).status == 404
        assert (await s.status(nid))["resolution"] is None
        done = await s.client.post(path, headers=ours, data={"csrf": token, "resolution": "ok"},
                                   allow_redirects=False)
        assert done.status == 303
        assert (await s.status(nid))["resolution"]["resolved_by"] == "console:ops"


async def test_failed_sign_ins_are_limited_per_address_and_logged_twice_at_most(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async with people(tmp_path) as s:
        key = await admin_key(s)
        caplog.set_level(logging.WARNING, "notifyd.console")
        most = s.ctx.cfg.console.max_failed_sign_ins
        for _ in range(most):
            assert (await sign_in(s, "nfy_wrong")).status == 401
        refused = await sign_in(s, key)  # even the right key, until the minute is over
        assert refused.status == 429 and "wait a minute" in await refused.text()
        for _ in range(20):
            await sign_in(s, "nfy_wrong")
        lines = [r.getMessage() for r in caplog.records if r.name == "notifyd.console"]
        assert len(lines) == 2, lines
        assert "failed sign-in" in lines[0] and "refused" in lines[1]
        assert "nfy_wrong" not in "".join(lines)
        s.e.clock.advance(60_001)
        assert (await sign_in(s, key)).status == 303


async def test_a_console_replay_is_on_the_timeline_with_its_operator(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        nid = await post(s, "report")
        await s.e.store.backend.write(lambda tx: tx.run(
            "UPDATE steps SET state = 'dead', reason = 'test' WHERE notification_id = ?",
            (nid,)))
        cookie = await session(s, await admin_key(s))
        page = await s.client.get("/console/dead", headers=cookie)
        assert nid in await page.text()
        token = await csrf(s, cookie)
        r = await s.client.post(f"/console/notifications/{nid}/replay", headers=cookie,
                                data={"csrf": token, "step_no": "0"}, allow_redirects=False)
        assert r.status == 303 and "replayed+1+step" in r.headers["Location"]
        lines = timeline(await s.e.record(nid))
        assert any("replayed by an operator (console:ops)" in ln for ln in lines), lines
        await s.e.run_dry()
        shown = await s.client.get(f"/console/notifications/{nid}", headers=cookie)
        text = await shown.text()
        assert "console:ops" in text and 'class="state sent"' in text


async def test_a_suppression_added_in_the_console_names_its_operator(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        cookie = await session(s, await admin_key(s))
        token = await csrf(s, cookie, "/console/suppressions")
        r = await s.client.post("/console/suppressions", headers=cookie, allow_redirects=False,
                                data={"csrf": token, "channel_type": "email",
                                      "address": "Bob@Example.org", "reason": "asked"})
        assert r.status == 303
        [listed] = await s.e.store.suppressions("default")
        assert (listed.address, listed.source, listed.reason) == (
            "bob@example.org", "console:ops", "asked")
        r = await s.client.post("/console/suppressions/remove", headers=cookie,
                                allow_redirects=False, data={
                                    "csrf": token, "channel_type": "email",
                                    "address": "bob@example.org"})
        assert r.status == 303 and await s.e.store.suppressions("default") == []


async def test_search_finds_by_id_dedup_key_and_user(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        await s.user("ada")
        nid = await post(s, "report", dedup="inv-7")
        cookie = await session(s, await admin_key(s))
        for q in (nid, "ada:inv-7"):
            r = await s.client.get("/console/search", params={"q": q}, headers=cookie,
                                   allow_redirects=False)
            assert r.headers["Location"] == f"/console/notifications/{nid}"
        listed = await s.client.get("/console/search", params={"q": "ada"}, headers=cookie)
        assert nid in await listed.text()
        person = await s.client.get("/console/people/ada", headers=cookie)
        assert "ada@example.org" in await person.text()


async def test_preferences_saved_over_a_stale_version_are_refused(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        assert (await put_prefs(s, "ada", {"version": 0, "opt_out": True}))[0] == 200
        status, body = await put_prefs(s, "ada", {"version": 0, "opt_out": False})
        assert status == 412 and body["error"]["code"] == "precondition_failed"
        assert body["error"]["field"] == "version"
        status, body = await put_prefs(s, "ada", {
            "version": 1, "opt_out": False, "timezone": "Europe/Paris",
            "quiet_hours": {"start": "22:00", "end": "07:00"}})
        assert status == 200 and (body["version"], body["timezone"], body["quiet_hours"]) == (
            2, "Europe/Paris", {"start": "22:00", "end": "07:00"})
        status, body = await put_prefs(s, "ada", {"timezone": "Mars/Olympus"})
        assert status == 422 and body["error"]["field"] == "timezone"


async def test_every_email_links_to_the_preference_centre(tmp_path: Path) -> None:
    report = {**REPORT_TEMPLATES, "email.text.j2": "{{ what }}\nPrefs: {{ preferences_url }}\n"}
    async with stack(tmp_path, SETTINGS, {"report": report,
                                          "social_digest": DIGEST_TEMPLATES}) as s:
        await s.user("ada")
        await post(s, "report")
        await s.e.run_dry()
        [mail] = s.smtp.received
        body = email.message_from_bytes(mail.data).get_payload(decode=True).decode()
        link = re.search(rf"{re.escape(PUBLIC)}(/preferences/prefs1\.\S+)", body)
        assert link is not None, body
        page = await s.client.get(link.group(1))
        text = await page.text()
        assert page.status == 200 and 'data-user="ada"' in text
        token = re.search(r'data-token="([^"]+)"', text)
        assert token is not None
        prefs = await s.client.get("/v1/users/ada/preferences", headers=auth(s, token.group(1)))
        assert prefs.status == 200
        broken = await s.client.get(link.group(1)[:-3] + "xyz")
        assert broken.status == 404 and "does not work" in await broken.text()


@pytest.mark.time_of_day
async def test_a_digested_item_links_to_the_digest_that_carried_it(tmp_path: Path) -> None:
    async with people(tmp_path) as s:
        nid, digest_id, _ = await carried_mention(s)
        cookie = await session(s, await admin_key(s))
        link = f'<a href="/console/notifications/{digest_id}">{digest_id}</a>'

        async def page() -> str:
            r = await s.client.get(f"/console/notifications/{nid}", headers=cookie)
            assert r.status == 200
            return await r.text()

        text = await page()
        assert f"carried in digest {link} (email_pending)" in text
        assert f"digested: carried in digest {digest_id}, not sent yet" in text  # the timeline
        assert '<strong>digested</strong>' in text and "held: held" not in text
        await s.e.run_dry()
        assert f"went out in digest {link} (sent)" in await page()
