"""What the user docs say is what notifyd does: the lists the code keeps (the metrics, the error
codes, the profile's fields) are the code's, the delivery table tells the webhook channel's 4xx
as it is handled, README stays a short introduction whose links land, and no user doc speaks of
how the work was organised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_support import README, ROOT, blocks_of, pages, text
from markdown.extensions.toc import slugify

from notifyd.channels import webhook
from notifyd.channels.base import Failed
from notifyd.domain.recipients import USER_FIELDS
from notifyd.engine import metrics
from notifyd.http import errors


def _generated(page: str, marker: str) -> str:
    """The lines between `<!-- marker: command -->` and `<!-- /marker -->` on the page."""
    body = text(page)
    listed = body[body.index(f"<!-- {marker}:"):body.index(f"<!-- /{marker} -->")]
    return listed.split("\n", 1)[1]


def test_the_metrics_page_lists_the_registrys_names_types_labels_and_help() -> None:
    assert _generated("docs/monitoring.md", "metrics") == metrics.table(), (
        "docs/monitoring.md's metrics are stale: run .venv/bin/python -c 'from notifyd.engine."
        "metrics import table; print(table(), end=\"\")' and paste it between its markers")


def test_the_api_page_lists_every_error_code_with_its_status() -> None:
    assert _generated("docs/api.md", "errors") == errors.table(), (
        "docs/api.md's error codes are stale: run .venv/bin/python -c 'from notifyd.http.errors "
        "import table; print(table(), end=\"\")' and paste it between its markers")


def test_the_api_pages_profile_fields_are_what_put_users_takes() -> None:
    [row] = [line for line in text("docs/api.md").splitlines()
             if line.startswith("| `PUT /v1/users/")]
    shown = re.search(r"`\{(.*)\}`", row)
    assert shown is not None
    fields = {f.strip().split("?")[0] for f in re.sub(r"\{[^}]*\}", "", shown.group(1)).split(",")}
    assert fields == set(USER_FIELDS)


@pytest.mark.parametrize("status", [400, 409, 410, 413, 422, 451])
def test_the_webhook_channel_retries_a_4xx_as_the_delivery_table_says(status: int) -> None:
    assert isinstance(webhook.classify(status, {}, b""), Failed)
    delivery = text("docs/concepts.md")
    assert "4xx, except from the `webhook` channel" in delivery
    assert "every 4xx from the `webhook` channel" in delivery


def test_readme_is_a_short_introduction_with_the_two_commands() -> None:
    """What notifyd is, the five-minute path and links; the reference lives in docs/. The
    command that starts the daemon on its SQLite default, and the test command (which .ci/run
    ends with: tests/unit/test_packaging.py), are README's own."""
    assert len(text(README).splitlines()) <= 300
    codes = [b.code for b in blocks_of(README) if b.lang == "sh"]
    assert ".venv/bin/notifyd --config notifyd.toml serve\n" in codes
    assert any(c.endswith("&& .venv/bin/pytest -q\n") for c in codes)


def _anchors(page: Path) -> set[str]:
    """The ids MkDocs gives the page's headings (the toc extension's slugs)."""
    return {slugify(line.lstrip("#").strip(), "-")
            for line in page.read_text().splitlines() if re.match(r"#{1,6} ", line)}


def test_readmes_links_land_on_a_file_and_a_heading_there() -> None:
    """README is read on the forge and in the sdist, outside the site's strict build."""
    links = re.findall(r"\]\(([^)\s]+)\)", text(README))
    assert len(links) >= 10
    broken = []
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path
        if not target.exists() or (anchor and anchor not in _anchors(target)):
            broken.append(link)
    assert broken == []


USER_DOCS = [ROOT / "ARCHITECTURE.md", ROOT / "notifyd.example.toml", ROOT / "mkdocs.yml",
             ROOT / "pyproject.toml", *(ROOT / page for page in pages()),
             *sorted((ROOT / "examples").rglob("*.py")), *sorted((ROOT / "notifyd").rglob("*.py"))]
WORK_TALK = re.compile(r"\bseeds? \d{3}\b|\bissue \d+\b|\bissue's\b|\bfinding \d+\b", re.I)


def test_no_user_doc_speaks_of_seeds_issues_or_findings() -> None:
    assert {"README.md", "docs/index.md"} <= {p.relative_to(ROOT).as_posix() for p in USER_DOCS}
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for path in USER_DOCS for n, line in enumerate(path.read_text().splitlines(), 1)
             if WORK_TALK.search(line)]
    assert found == []
