"""The names a person reads, in-process over the real engine and store: the preferences API and
GET .../names give each kind and category its title and description in the person's locale
(else its language, else the templates' default locale, else the identifier made readable);
the preference centre's switches are the media each category's kinds can use; the unsubscribe
page names the category as its person reads it; the console shows the names beside the
identifiers. The same in a real browser: tests/process/test_pages.py.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from stack_support import Stack, stack
from test_console import admin_key, session
from test_people import DIGEST_TEMPLATES, REPORT_TEMPLATES, SETTINGS, auth, post

from notifyd.domain import signed
from notifyd.http.auth import hash_key, new_key

NAMES = {
    "en": """
[kinds.report]
title = "Usage summary"
description = "What your team did this month."

[kinds.social_digest]
title = "Mentions, once a day"

[categories.reports]
title = "Summaries"
description = "Monthly summaries of your account."

[categories.security]
title = "Sign-in codes"
""",
    "de": """
[kinds.report]
title = "Nutzungsübersicht"

[kinds.social_digest]
title = "Erwähnungen, einmal am Tag"

[categories.reports]
title = "Übersichten"
description = "Monatliche Übersichten Ihres Kontos."

[categories.security]
title = "Anmeldecodes"
""",
}


@asynccontextmanager
async def named(tmp_path: Path) -> AsyncIterator[Stack]:
    for locale, text in NAMES.items():
        path = tmp_path / "templates" / "names" / f"{locale}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    async with stack(tmp_path, SETTINGS, {"social_digest": DIGEST_TEMPLATES,
                                          "report": REPORT_TEMPLATES}) as s:
        await s.user("ada")
        await s.client.patch("/v1/users/ada", json={"locale": "de-AT"}, headers=auth(s))
        await s.user("cy", email="cy@example.org")
        await s.client.patch("/v1/users/cy", json={"locale": "fr"}, headers=auth(s))
        yield s


async def get(s: Stack, path: str, token: str | None = None, status: int = 200) -> Any:
    r = await s.client.get(path, headers=auth(s, token))
    assert r.status == status, await r.text()
    return await r.json()


def shown(categories: dict[str, Any]) -> dict[str, tuple[str, str | None, list[str]]]:
    return {name: (c["title"], c["description"], c["media"]) for name, c in categories.items()}


async def test_the_preferences_name_each_category_and_the_media_its_kinds_use(
        tmp_path: Path) -> None:
    async with named(tmp_path) as s:
        de = await get(s, "/v1/users/ada/preferences")
        assert shown(de["categories"]) == {
            "reports": ("Übersichten", "Monatliche Übersichten Ihres Kontos.", ["email"]),
            "security": ("Anmeldecodes", None, ["sms"]),
            # mention by SMS, its digest by email: the union over the category's kinds
            "social": ("Social", None, ["email", "sms"]),
            "task": ("Task", None, ["email", "sms"])}
        fr = await get(s, "/v1/users/cy/preferences")  # no French: the default locale's
        assert shown(fr["categories"])["reports"] == (
            "Summaries", "Monthly summaries of your account.", ["email"])
        nobody = await get(s, "/v1/users/nobody/preferences")  # no profile, no locale
        assert nobody["categories"]["security"]["title"] == "Sign-in codes"


async def test_the_names_call_gives_every_kind_and_category_in_the_persons_locale(
        tmp_path: Path) -> None:
    async with named(tmp_path) as s:
        doc = await get(s, "/v1/users/ada/names")
        assert doc["locale"] == "de-AT"
        assert doc["kinds"]["report"] == {"title": "Nutzungsübersicht", "description": None}
        assert doc["kinds"]["social_digest"]["title"] == "Erwähnungen, einmal am Tag"
        assert doc["kinds"]["otp"] == {"title": "Otp", "description": None}
        assert doc["categories"]["reports"]["title"] == "Übersichten"
        assert sorted(doc["kinds"]) == sorted(SETTINGS["kinds"])
        english = await get(s, "/v1/users/cy/names")
        assert english["kinds"]["report"] == {"title": "Usage summary",
                                              "description": "What your team did this month."}

        # the person's own token reaches it, a preference link's token too; another's does not
        made = await s.client.post("/v1/users/ada/tokens", json={}, headers=auth(s))
        token = (await made.json())["token"]
        assert (await get(s, "/v1/users/ada/names", token))["locale"] == "de-AT"
        await get(s, "/v1/users/cy/names", token, status=403)
        secret = await s.e.store.signing_key(signed.tenant_key_name("default"))
        link_token = signed.make_user_token(secret, "default", "ada", s.e.now // 1000 + 600,
                                            scope=signed.PREFERENCES_ONLY)
        assert (await get(s, "/v1/users/ada/names", link_token))["kinds"]
        # a key limited to some kinds reaches nothing every kind shares
        limited = new_key()
        await s.e.store.create_key(hash_key(limited), "reports-only", "default", ("report",),
                                   frozenset({"read"}))
        refused = await get(s, "/v1/users/ada/names", limited, status=403)
        assert refused["error"]["code"] == "kind_not_allowed"


async def test_the_unsubscribe_page_names_the_category_as_its_person_reads_it(
        tmp_path: Path) -> None:
    async with named(tmp_path) as s:
        key = s.ctx.link_key or b""

        async def page(user: str, category: str, method: str = "GET") -> tuple[int, str]:
            r = await s.client.request(method, "/v1/unsubscribe/"
                                       + signed.make_unsubscribe(key, "default", user, category))
            page = re.sub(r"<[^>]+>", "", await r.text())  # what the person reads
            return r.status, re.sub(r"\s+", " ", page)

        status, text = await page("ada", "reports")
        assert status == 200 and "Unsubscribe from “Übersichten”?" in text
        assert "Monatliche Übersichten Ihres Kontos." in text and "by email." in text
        status, text = await page("cy", "reports")
        assert status == 200 and "Unsubscribe from “Summaries”?" in text
        status, text = await page("cy", "social")  # no file names it: made readable
        assert "Unsubscribe from “Social”?" in text and "by email or SMS." in text
        status, text = await page("ada", "security", "POST")
        assert status == 400 and "“Anmeldecodes” messages are about" in text
        status, text = await page("ada", "reports", "POST")
        assert status == 200 and "no longer receive “Übersichten” messages" in text
        for user in ("ada", "cy"):
            for category in ("reports", "social"):  # never the identifier itself
                assert category not in (await page(user, category))[1]


async def test_the_console_shows_a_persons_categories_by_name_beside_their_identifiers(
        tmp_path: Path) -> None:
    async with named(tmp_path) as s:
        await post(s, "report")
        cookie = await session(s, await admin_key(s))
        text = await (await s.client.get("/console/people/ada", headers=cookie)).text()
        assert "Übersichten <small>(reports)</small>" in text
        assert "Anmeldecodes <small>(security, always on)</small>" in text
