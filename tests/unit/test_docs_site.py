"""The docs build as a site, strictly: MkDocs reads mkdocs.yml and docs/ as `mkdocs build
--strict` does, and any warning (a link to a page or heading that is not there, a page left out
of the nav, a snippet file missing) fails. Offline: the theme is MkDocs' own, no plugin."""

from __future__ import annotations

from pathlib import Path

import pytest
from docs_support import ROOT, pages
from mkdocs.commands.build import build
from mkdocs.config import load_config


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The site built into tmp_path, as `mkdocs build --strict` from the repository's root
    builds it (the config page's snippet is found from there)."""
    monkeypatch.chdir(ROOT)
    config = load_config(str(ROOT / "mkdocs.yml"), strict=True, site_dir=str(tmp_path / "site"))
    build(config)  # raises mkdocs' Abort on any warning, strict being set
    return tmp_path / "site"


def test_the_site_builds_strictly_with_every_page_in_it(site: Path) -> None:
    built = {p.relative_to(site).as_posix() for p in site.rglob("index.html")}
    assert built == {"index.html"} | {f"{page[5:-3]}/index.html" for page in pages()
                                      if page.startswith("docs/") and page != "docs/index.md"}


def test_the_config_page_holds_every_key_as_the_code_writes_them(site: Path) -> None:
    page = (site / "config" / "index.html").read_text()
    assert "--8&lt;--" not in page and "[store.sqlite]" in page and "max_body_bytes" in page

