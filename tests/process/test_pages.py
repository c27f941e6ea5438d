"""The console, the inbox widget and the preference centre in a real browser: Debian's chromium
driven by Playwright, against the real daemon in a subprocess (one for the module). Each page is
checked by axe-core (vendored, MPL-2.0) for serious or critical violations and screenshotted into
build/screenshots (NOTIFYD_SCREENSHOTS elsewhere). No sleeps: every wait is on the page's state
or the daemon's rows, with a deadline.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
import tomli_w
from docs_support import example
from engine_support import Daemon, clean_env, create_key, notifyd_cmd

from notifyd.domain import signed

CHROMIUM = "/usr/bin/chromium"
# The names a person reads (the templates folder's names/<locale>.toml): every page shows these,
# in the person's locale or else the default's, never the identifiers task, news.
NAMES = {"en": '[kinds.task]\ntitle = "Your tasks"\n\n[kinds.news]\ntitle = "Product news"\n\n'
               '[categories.news]\ntitle = "Newsletter"\ndescription = "What is new, monthly."\n',
         "de": '[kinds.task]\ntitle = "Ihre Aufgaben"\n\n[categories.news]\n'
               'title = "Rundbrief"\ndescription = "Was es Neues gibt, monatlich."\n'}
AXE = Path(__file__).parent.parent / "vendor" / "axe.min.js"
SHOTS = Path(os.environ.get("NOTIFYD_SCREENSHOTS",
                            Path(__file__).parent.parent.parent / "build" / "screenshots"))
WAIT_MS = 20_000


@dataclass
class Hook:
    """A producer's webhook endpoint that answers what the test says, and a product's page."""

    status: int = 500
    host_page: str = ""
    calls: list[int] = field(default_factory=list)


def _server(hook: Hook) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hook.calls.append(hook.status)
            self.send_response(hook.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:  # noqa: N802
            body = hook.host_page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Site:
    db: Path
    config: Path
    daemon: Daemon
    hook: Hook
    origin: str  # the product's page: another origin than the daemon's
    key: str  # a producer's key
    admin: str  # an operator's

    @property
    def url(self) -> str:
        return self.daemon.url

    def api(self, method: str, path: str, body: Any = None, token: str | None = None) -> Any:
        request = urllib.request.Request(
            f"{self.url}{path}", method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {token or self.key}",
                     "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")

    def post(self, kind: str, user: str = "ada", **params: Any) -> str:
        return str(self.api("POST", "/v1/notifications", {
            "user_id": user, "kind": kind, "params": params})["notification_id"])

    def token(self, user: str = "ada") -> str:
        return str(self.api("POST", f"/v1/users/{user}/tokens", {})["token"])

    def restart(self) -> None:
        port = int(self.url.rsplit(":", 1)[1])
        assert self.daemon.stop() == 0, self.daemon.stderr()
        self.daemon = Daemon(self.db, self.config, port=port)
        Daemon.STARTED.remove(self.daemon)  # the module's daemon: its fixture stops it


def until(what: str, check: Callable[[], Any], page: Any = None) -> Any:
    """`check()` until it is truthy, bounded; its value. With a page, the wait lets Playwright
    answer the page meanwhile (a function it exposed)."""
    deadline = time.monotonic() + WAIT_MS / 1000
    while not (found := check()):
        assert time.monotonic() < deadline, f"never: {what}"
        if page is not None:
            page.wait_for_timeout(50)
        else:
            time.sleep(0.05)
    return found


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    folder = tmp_path_factory.mktemp("pages")
    hook = Hook()
    server = _server(hook)
    origin = f"http://127.0.0.1:{server.server_address[1]}"
    for kind, name, text in (("task", "inbox.title.j2", "{{ what }}"),
                             ("news", "email.subject.j2", "{{ what }}"),
                             ("news", "email.text.j2", "{{ what }}")):
        path = folder / "templates" / kind / "en" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (folder / "templates" / "names").mkdir()
    for locale, text in NAMES.items():
        (folder / "templates" / "names" / f"{locale}.toml").write_text(text)
    config = folder / "notifyd.toml"
    config.write_text(tomli_w.dumps({
        "templates": {"folder": "templates"},
        "console": {"demo_inbox": True},
        "tenants": {"default": {"cors_origins": [origin]}},
        "channels": {
            "hook": {"type": "webhook", "url": f"{origin}/hook", "max_attempts": 1},
            # nothing listens there: a news email that goes out fails, one that is off never tries
            "mail": {"type": "smtp", "host": "127.0.0.1", "port": 9, "tls": "none",
                     "from_address": "news@example.org"}},
        "kinds": {
            "alert": {"ladder": [{"channel": "hook"}]},
            "task": {"inbox": True, "stop": "read", "ladder": [
                {"channel": "log", "timeout_sec": 3600}, {"channel": "log"}]},
            "news": {"category": "news", "transactional": False,
                     "ladder": [{"channel": "mail"}]}}}))
    db = folder / "notifyd.db"
    key = create_key(db, config)
    made = subprocess.run(notifyd_cmd(db, "keys", "create", "--name", "ops", "--scopes",
                                      "admin,read", config=config),
                          capture_output=True, text=True, env=clean_env(), timeout=60,
                          check=True)
    site = Site(db, config, Daemon(db, config), hook, origin, key, made.stdout.strip())
    site.api("PUT", "/v1/users/ada", {"email": "ada@example.org"})
    try:
        yield site
    finally:
        site.daemon.stop()
        server.shutdown()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (.ci/run does)")
    with sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        except Exception as e:  # noqa: BLE001 - say why the browser tests cannot run
            pytest.fail(f"chromium did not start: {e}")
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(bypass_csp=True, locale="de-DE")  # axe is injected
    context.set_default_timeout(WAIT_MS)
    yield context.new_page()
    context.close()


def words(text: str) -> str:
    """Text as a person reads it: its words, one space apart."""
    return " ".join(text.split())


def look(page: Any, name: str) -> None:
    """No serious or critical accessibility violation on the page as it is; a screenshot."""
    page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => (await axe.run()).violations
        .filter(v => ['serious', 'critical'].includes(v.impact))
        .map(v => `${v.id}: ${v.help} (${v.nodes.map(n => n.target).join(' ')})`)""")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
    assert found == [], f"{name}: {found}"


def test_the_console_signs_in_finds_draws_and_replays_a_dead_step(site: Site, page: Any) -> None:
    site.hook.status = 500
    nid = site.post("alert")
    until("the step dead", lambda: site.api("GET", f"/v1/notifications/{nid}")["steps"][0][
        "status"] == "dead")
    page.goto(f"{site.url}/console")
    assert page.url.endswith("/console/sign-in")
    look(page, "console-sign-in")
    page.get_by_label("API key with the admin scope").fill(site.admin)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/console")
    page.wait_for_selector("#live[data-updates]")  # the overview refreshed over SSE
    assert page.locator("#breakers").inner_text().count("closed") >= 1
    look(page, "console-overview")

    page.get_by_role("searchbox").fill(nid)
    page.get_by_role("button", name="Search").click()
    page.wait_for_url(f"**/console/notifications/{nid}")
    assert "dead: retry budget spent after 1 attempt; last: HTTP 500" in page.locator(
        "#timeline").inner_text()
    assert page.locator(".axis .lane .mark.attempt").count() == 1
    look(page, "console-notification-dead")

    site.hook.status = 200
    page.get_by_role("button", name="Replay step 0").click()
    page.wait_for_selector("text=replayed 1 step")
    def sent() -> bool:
        page.reload()
        return bool(page.locator("#step-0 .step-state").inner_text() == "sent")

    until("the replayed step sent", sent, page)
    assert site.hook.calls == [500, 200]
    assert "replayed by an operator (console:ops)" in page.locator("#timeline").inner_text()
    look(page, "console-notification-sent")

    for path, name in (("/console/dead", "console-dead"),
                       ("/console/suppressions", "console-suppressions"),
                       ("/console/people/ada", "console-person"),
                       ("/console/search?q=ada", "console-search")):
        page.goto(f"{site.url}{path}")
        look(page, name)


# A product's page with the three lines the docs give (docs/people.md, The inbox widget), where
# the product's backend gave an expired token and hands a fresh one through the page.
HOST = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>A product</title>
</head><body><main><h1>A product's page</h1><script>
const token = "nut1.expired.x";
const fetchUserToken = () => window.freshToken();
</script>
WIDGET</main></body></html>"""


def host_page(url: str, user: str) -> str:
    widget = example("inbox widget").code
    assert widget.count("https://notify.example.com") == 1 and widget.count('"u_42"') == 1
    return HOST.replace("WIDGET", widget.replace("https://notify.example.com", url)
                        .replace('"u_42"', f'"{user}"'))


def test_the_widget_shows_items_live_marks_read_and_survives_a_restart(
        site: Site, page: Any) -> None:
    site.hook.host_page = host_page(site.url, "bea")
    asked: list[str] = []

    def fresh() -> str:
        asked.append("token")
        return site.token("bea")

    page.expose_function("freshToken", fresh)
    page.goto(f"{site.origin}/")
    bell = page.locator("#bell")
    page.on("console", lambda m: print("page:", m.text))
    until("the widget connected", lambda: bell.get_attribute("data-live") == "yes", page)
    assert asked, "the expired token was never replaced through the page's callback"
    nid = site.post("task", user="bea", what="Review the report")
    until("the badge", lambda: bell.get_attribute("data-unread") == "1", page)
    page.get_by_role("button", name="Notifications, 1 unread").click()
    item = page.locator("li.item", has_text="Review the report")
    item.wait_for()
    # bea has no locale: her item's kind by its name in the default locale's file
    assert words(item.locator(".kind").inner_text()) == "Your tasks ·"
    assert "2" in item.locator("time").inner_text() and "." in item.locator("time").inner_text()
    look(page, "widget-open")

    item.get_by_role("button", name="Mark read: Review the report").click()
    until("the badge cleared", lambda: bell.get_attribute("data-unread") == "0", page)
    shown = site.api("GET", f"/v1/notifications/{nid}")
    assert shown["resolution"]["resolution"] == "read"  # stop = "read": the ladder ended

    connects = int(bell.get_attribute("data-connects") or 0)
    site.restart()
    until("the widget back", lambda: int(bell.get_attribute("data-connects") or 0) > connects
          and bell.get_attribute("data-live") == "yes", page)
    site.post("task", user="bea", what="After the restart")
    page.locator("li.item", has_text="After the restart").wait_for()
    until("the new badge", lambda: bell.get_attribute("data-unread") == "1", page)
    assert page.locator("li.item").count() == 2  # each item once
    page.keyboard.press("Escape")
    assert page.evaluate("document.activeElement.id") == "bell"  # focus back on the bell
    look(page, "widget-after-restart")


@pytest.mark.time_of_day
def test_the_preference_centre_saves_with_its_version_and_decides_the_next_send(
        site: Site, page: Any) -> None:
    site.api("PUT", "/v1/users/cy", {"email": "cy@example.org"})
    subprocess.run(notifyd_cmd(site.db, "links", "rotate", "--overlap", "0",
                               config=site.config),
                   capture_output=True, env=clean_env(), timeout=60, check=True)
    with closing(sqlite3.connect(site.db)) as conn:
        key = bytes(conn.execute("SELECT secret FROM signing_keys WHERE name = ?",
                                 (signed.PREFERENCE_LINKS_KEY,)).fetchone()[0])
    expires = int(time.time()) + 3600
    link = f"{site.url}/preferences/{signed.make_preferences_link(key, 'default', 'cy', expires)}"
    page.goto(link)
    status = page.locator("#status")
    status.get_by_text("version 0").wait_for()
    look(page, "preferences")
    other = page.context.new_page()  # a second tab, open on the same version
    other.goto(f"{site.url}/preferences#user=cy&token={site.token('cy')}")
    other.locator("#status").get_by_text("version 0").wait_for()

    # Only the media a category's kinds can use: news goes by email alone; task's kinds by
    # none a person may turn off (the log), so it is no row.
    table = page.locator("#categories")
    assert table.locator("thead th").all_inner_texts() == ["Topic", "Email"]
    assert [words(t) for t in table.locator("tbody th").all_inner_texts()] == [
        "Newsletter What is new, monthly."]
    page.get_by_label("Newsletter: Email").uncheck()
    page.get_by_label("Hold messages that can wait during quiet hours").check()
    assert (page.locator("#quiet_start").input_value(),
            page.locator("#quiet_end").input_value()) == ("22:00", "07:00")  # the page's own
    # Hours that start an hour from now: the news is decided now at any hour of the day (in
    # quiet hours it would wait for their end).
    start, end = hours_from_now("Europe/Berlin", 1, 2)
    page.locator("#quiet_start").fill(start)
    page.locator("#quiet_end").fill(end)
    page.get_by_label("Time zone").fill("Europe/Berlin")
    page.get_by_role("button", name="Save").click()
    status.get_by_text("Saved (version 1)").wait_for()
    other.get_by_role("button", name="Save").click()
    other.locator("#status").get_by_text("changed elsewhere").wait_for()
    look(other, "preferences-conflict")

    nid = site.post("news", user="cy", what="Our news")
    step = until("the news decided", lambda: next(
        (s for s in site.api("GET", f"/v1/notifications/{nid}")["steps"]
         if s["status"] != "pending"), None))
    assert step["status"] == "suppressed" and step["pref_version"] == 1, step
    prefs = site.api("GET", "/v1/users/cy/preferences")
    assert (prefs["timezone"], prefs["quiet_hours"]) == (
        "Europe/Berlin", {"start": start, "end": end})


def hours_from_now(zone: str, *hours: int) -> list[str]:
    """The wall clock on `zone` that many hours from now, as HH:MM."""
    now = datetime.now(ZoneInfo(zone))
    return [(now + timedelta(hours=h)).strftime("%H:%M") for h in hours]


def test_the_demo_page_shows_the_widget(site: Site, page: Any) -> None:
    site.api("PUT", "/v1/users/dee", {"locale": "de-AT"})
    site.post("task", user="dee", what="Bericht lesen")
    page.goto(f"{site.url}/demo/inbox")
    page.get_by_label("User id").fill("dee")
    page.get_by_label("User token").fill(site.token("dee"))
    page.get_by_role("button", name="Show the bell").click()
    until("the demo's widget",
          lambda: page.locator("#bell").get_attribute("data-live") == "yes", page)
    page.get_by_role("button", name="Notifications, 1 unread").click()
    item = page.locator("li.item", has_text="Bericht lesen")
    item.wait_for()
    until("the kind's German name", lambda: item.locator(".kind").count() == 1, page)
    assert words(item.locator(".kind").inner_text()) == "Ihre Aufgaben ·"  # de-AT: de's file
    look(page, "demo-inbox")


def test_a_german_readers_preference_centre_and_unsubscribe_page_name_the_category(
        site: Site, page: Any) -> None:
    site.api("PUT", "/v1/users/eva", {"email": "eva@example.org", "locale": "de"})
    page.goto(f"{site.url}/preferences#user=eva&token={site.token('eva')}")
    page.locator("#status").get_by_text("version 0").wait_for()
    assert [words(t) for t in page.locator("#categories tbody th").all_inner_texts()] == [
        "Rundbrief Was es Neues gibt, monatlich."]
    assert page.get_by_label("Rundbrief: Email").is_checked()
    with closing(sqlite3.connect(site.db)) as conn:
        key = bytes(conn.execute("SELECT secret FROM signing_keys WHERE name = ?",
                                 (signed.LINKS_KEY,)).fetchone()[0])
    page.goto(f"{site.url}/v1/unsubscribe/{signed.make_unsubscribe(key, 'default', 'eva', 'news')}")
    assert page.get_by_role("heading").inner_text() == "Unsubscribe from “Rundbrief”?"
    assert "Was es Neues gibt, monatlich." in page.inner_text("main")
    assert "news" not in page.inner_text("main")
    look(page, "unsubscribe")
    page.get_by_role("button", name="Unsubscribe").click()
    page.get_by_role("heading", name="You are unsubscribed").wait_for()
    assert site.api("GET", "/v1/users/eva/preferences")["categories"]["news"]["email"] is False


def test_the_console_previews_a_kinds_templates(site: Site, page: Any) -> None:
    page.goto(f"{site.url}/console/templates")
    page.get_by_label("API key with the admin scope").fill(site.admin)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/console/templates")
    page.get_by_label("Kind").select_option("news")
    page.get_by_label("The person's locale").fill("de-AT")
    page.get_by_label("Channel").select_option("mail")
    page.get_by_label("Params (JSON)").fill('{"what": "Our <b>spring</b> news"}')
    page.get_by_role("button", name="Preview").click()
    page.locator("#preview").wait_for()
    assert page.locator("#h-shown").inner_text().startswith(
        "news by email in en (asked de-AT), version ")
    assert page.locator("#part-subject pre").inner_text() == "Our <b>spring</b> news"
    look(page, "console-template-preview")
    page.get_by_label("Params (JSON)").fill('{"when": "soon"}')
    page.get_by_role("button", name="Preview").click()
    assert page.get_by_role("alert").inner_text() == (
        "news/en/email.subject.j2: UndefinedError: 'what' is undefined")
