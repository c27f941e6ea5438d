"""The console's template preview in-process, over the real engine, store and templates: a kind,
a locale and a channel picked, params typed, each part shown as that channel sends it, the very
text `notifyd templates render` prints for the same input, and its problems worded as the
command words them. A session and the form's CSRF token are needed; nothing is written. The
same page in a real browser: tests/process/test_pages.py.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from click.testing import CliRunner
from stack_support import TEMPLATES, Stack, stack
from test_console import admin_key, csrf, session

from notifyd.cli import main

KINDS = {"report": {"category": "reports", "transactional": False, "inbox": True,
                    "ladder": [{"channel": "email", "timeout_sec": 60}, {"channel": "sms"}]},
         "otp": {"ladder": [{"channel": "sms"}]}}
GERMAN = {"email.subject.j2": "Bericht: {{ what }}",
          "email.text.j2": "{{ what }}\n-- {{ kind_title }} · {{ category_title }}\n",
          "email.html.j2": "<p><b>{{ what }}</b> · {{ kind_title }}</p>",
          "sms.text.j2": "{{ what }}", "inbox.title.j2": "{{ what }}"}
NAMES = {"en": '[kinds.report]\ntitle = "Usage summary"\n\n[categories.reports]\n'
               'title = "Summaries"\n',
         "de": '[kinds.report]\ntitle = "Nutzungsübersicht"\n\n[categories.reports]\n'
               'title = "Übersichten"\n'}


@asynccontextmanager
async def console(tmp_path: Path) -> AsyncIterator[tuple[Stack, dict[str, str], str]]:
    folder = tmp_path / "templates"
    for name, text in GERMAN.items():
        (folder / "report" / "de").mkdir(parents=True, exist_ok=True)
        (folder / "report" / "de" / name).write_text(text)
    (folder / "names").mkdir()
    for locale, text in NAMES.items():
        (folder / "names" / f"{locale}.toml").write_text(text)
    async with stack(tmp_path, {"kinds": KINDS}, {"otp": {"sms.text.j2": "{{ code }}"},
                                                   "report": TEMPLATES}) as s:
        cookie = await session(s, await admin_key(s))
        yield s, cookie, await csrf(s, cookie, "/console/templates")


async def shown(s: Stack, cookie: dict[str, str], token: str, status: int = 200,
                **form: str) -> str:
    r = await s.client.post("/console/templates", headers=cookie,
                            data={"csrf": token, "locale": "", **form})
    text = await r.text()
    assert r.status == status, text
    return html.unescape(text)


def cli(tmp_path: Path, *args: str) -> tuple[int, str]:
    done = CliRunner().invoke(main, ["--config", str(tmp_path / "notifyd.toml"), "templates",
                                     "render", *args])
    return done.exit_code, done.output


async def test_the_preview_shows_each_part_as_the_command_renders_it(tmp_path: Path) -> None:
    async with console(tmp_path) as (s, cookie, token):
        page = await s.client.get("/console/templates?kind=report", headers=cookie)
        text = await page.text()
        assert page.status == 200
        assert '<option value="report" selected>report · Usage summary</option>' in text
        assert '<option value="email" selected>email · smtp, renders email</option>' in text
        assert '<option value="de">' in text and '<option value="en">' in text  # its locales

        params = json.dumps({"what": "März <Zahlen>"})
        page_text = await shown(s, cookie, token, kind="report", locale="de-AT",
                                channel="email", params=params)
        code, printed = cli(tmp_path, "report", "--channel", "email", "--locale", "de-AT",
                            "--params", params)
        assert code == 0, printed
        heading, *files = printed.split("\n\n")[0].splitlines()
        assert heading.startswith("report by email in de (asked de-AT), version ")
        assert heading in page_text and all(f.strip() in page_text for f in files)
        parts = re.findall(r"----- (\w+) -----\n(.*?)(?=\n\n----- |\n+\Z)", printed, re.S)
        assert [p for p, _ in parts] == ["subject", "text", "html"]
        for part, body in parts:  # each part the command prints, on the page as it prints it
            assert f'<h3 id="h-part-{part}">{part}</h3>' in page_text
            assert f"<code>{body}</code>" in page_text, (part, body)
        assert "-- Nutzungsübersicht · Übersichten" in page_text  # the names, in German
        # the HTML part as a mail client shows it: a sandboxed frame, its markup escaped in it
        raw = await (await s.client.post("/console/templates", headers=cookie, data={
            "csrf": token, "kind": "report", "locale": "de", "channel": "email",
            "params": params})).text()
        assert ('<iframe sandbox="" class="rendered" title="The html part as a mail client '
                'shows it" srcdoc="&lt;p&gt;&lt;b&gt;März &amp;lt;Zahlen&amp;gt;') in raw

        for channel in ("sms", "inbox"):  # the ladder's next rung; the inbox item
            page_text = await shown(s, cookie, token, kind="report", channel=channel,
                                    params=params)
            assert f"report by {channel} in en, version " in page_text


async def test_a_problem_reads_as_the_command_says_it(tmp_path: Path) -> None:
    async with console(tmp_path) as (s, cookie, token):
        for form, args in (
                ({"channel": "email", "params": "{\"what\": 1"},
                 ["--channel", "email", "--params", "{\"what\": 1"]),
                ({"channel": "email", "params": "[1]"}, ["--channel", "email", "--params", "[1]"]),
                ({"channel": "email", "params": "{}"}, ["--channel", "email"]),
                ({"channel": "fax", "params": "{}"}, ["--channel", "fax"]),
                ({"channel": "push", "params": "{}"}, ["--channel", "push"])):
            page = await shown(s, cookie, token, 422, kind="report", **form)
            code, printed = cli(tmp_path, "report", *args)
            said = printed.strip().removeprefix("Error: ").removeprefix("--")
            assert code == 1 and said, printed
            found = re.search(r'<p class="error" role="alert" id="preview-error">(.*?)</p>',
                              page, re.S)
            assert found is not None and found.group(1) == said, (form, said)
        page = await shown(s, cookie, token, 422, kind="report", channel="email", params="{}")
        assert "report/en/email.subject.j2: UndefinedError: 'what' is undefined" in page


async def test_the_preview_needs_a_session_and_its_token_and_writes_nothing(
        tmp_path: Path) -> None:
    async with console(tmp_path) as (s, cookie, token):
        form = {"kind": "otp", "channel": "sms", "params": '{"code": "123456"}'}
        refused = await s.client.post("/console/templates", headers=cookie, data=form)
        assert refused.status == 403 and "csrf" in await refused.text()
        nobody = await s.client.post("/console/templates", data={"csrf": token, **form})
        assert nobody.status == 401
        away = await s.client.get("/console/templates", allow_redirects=False)
        assert (away.status, away.headers["Location"]) == (
            303, "/console/sign-in?next=/console/templates")
        assert "123456" in await shown(s, cookie, token, **form)
        assert await s.e.store.notifications_of("default", "preview", 10) == []
