"""The names a person reads for kinds and categories, from real names files in tmp_path: the
locale chain taken whole per entry, the readable fallback that never shows an identifier, each
problem a names file can have (named by file and entry, refusing the start as a template does),
the names every template gets, and the versions and fingerprint that follow the files."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomli_w
from docs_support import example
from test_templates import EMAIL, SAMPLE, write

from notifyd.config import load_config
from notifyd.core.names import Name, Names, humanised
from notifyd.engine.names import read_names
from notifyd.engine.render import load_templates, read_templates
from notifyd.engine.starter import render_starter, write_starter
from notifyd.engine.templates import Templates

NAMES_EN = """
[kinds.mention_digest]
title = "Mentions, once a day"
description = "Everything people said to you, in one email."

[categories.social]
title = "Conversations"
"""
NAMES_DE = """
[kinds.mention_digest]
title = "Erwähnungen, einmal am Tag"

[categories.social]
title = "Unterhaltungen"
description = "Was andere Ihnen schreiben."
"""
FOOTER = {"email.subject.j2": "{{ kind_title }}\n",
          "email.text.j2": "{{ kind_title }} | {{ kind_description }} | {{ category_title }} | "
                           "{{ category_description }}\n"}


def folder(tmp_path: Path, **more: str) -> Path:
    return write(tmp_path / "t", {"names/en.toml": NAMES_EN, "names/de.toml": NAMES_DE,
                                  **{f"mention_digest/en/{n}": s for n, s in FOOTER.items()},
                                  **more})


def test_an_identifier_no_file_names_is_made_readable() -> None:
    assert humanised("mention_digest") == "Mention digest"
    assert humanised("ops.alerts-eu") == "Ops alerts eu"
    assert humanised("otp") == "Otp"
    assert Names().kind("mention_digest", "de") == Name("Mention digest")


@pytest.mark.parametrize(("locale", "kind", "category"), [
    ("de", Name("Erwähnungen, einmal am Tag"),
     Name("Unterhaltungen", "Was andere Ihnen schreiben.")),
    ("de_AT.UTF-8", Name("Erwähnungen, einmal am Tag"),
     Name("Unterhaltungen", "Was andere Ihnen schreiben.")),
    ("fr", Name("Mentions, once a day", "Everything people said to you, in one email."),
     Name("Conversations")),
    (None, Name("Mentions, once a day", "Everything people said to you, in one email."),
     Name("Conversations")),
])
def test_a_name_comes_whole_from_the_first_locale_of_the_chain_that_has_it(
        tmp_path: Path, locale: str | None, kind: Name, category: Name) -> None:
    """German has no description of the kind: the German title stands alone rather than beside
    an English description."""
    found = read_names(folder(tmp_path), "en")
    assert found.problems == ()
    assert found.names.kind("mention_digest", locale) == kind
    assert found.names.category("social", locale) == category
    assert found.names.category("billing", locale) == Name("Billing")


def test_the_default_locale_is_the_last_before_the_readable_identifier(tmp_path: Path) -> None:
    names = read_names(folder(tmp_path), "de").names
    assert names.kind("mention_digest", "fr").title == "Erwähnungen, einmal am Tag"
    assert names.kind("mention_digest", "en-GB").title == "Mentions, once a day"


@pytest.mark.parametrize(("files", "problem"), [
    ({"names/de.toml": "[kinds.x\n"}, "names/de.toml: not TOML: "),
    ({"names/de.toml": b"\xff\xfe"}, "names/de.toml: not UTF-8 at byte 0"),
    ({"names/de.toml": '[kind.x]\ntitle = "X"\n'}, "names/de.toml: kind: unknown table"),
    ({"names/de.toml": 'kinds = "x"\n'}, "names/de.toml: kinds: must be a table"),
    ({"names/de.toml": 'kinds.x = "X"\n'}, "names/de.toml: kinds.x: must be a table"),
    ({"names/de.toml": '[kinds.x]\nname = "X"\n'}, "names/de.toml: kinds.x: name: unknown key"),
    ({"names/de.toml": '[kinds.x]\ndescription = "X"\n'},
     "names/de.toml: kinds.x: title: needs the words a person reads"),
    ({"names/de.toml": '[kinds.x]\ntitle = " "\n'}, "kinds.x: title: needs the words"),
    ({"names/de.toml": f'[kinds.x]\ntitle = "{"x" * 81}"\n'},
     "names/de.toml: kinds.x: title: one line of at most 80 characters"),
    ({"names/de.toml": '[kinds.x]\ntitle = """a\nb"""\n'}, "kinds.x: title: one line"),
    ({"names/de.toml": f'[categories.x]\ntitle = "X"\ndescription = "{"y" * 301}"\n'},
     "names/de.toml: categories.x: description: text of at most 300 characters"),
    ({"names/d.toml": '[kinds.x]\ntitle = "X"\n'}, "names/d.toml: 'd' is not a locale"),
    ({"names/de.toml": "", "names/DE.toml": ""}, "names/de.toml: names/DE.toml is the same "
                                                  "locale; keep one file"),
])
def test_each_problem_names_its_file_and_entry(tmp_path: Path, files: dict[str, str | bytes],
                                               problem: str) -> None:
    found = read_names(write(tmp_path, files), "en")
    assert any(p.startswith(problem) or problem in p for p in found.problems), found.problems
    t = Templates(tmp_path)
    assert any(problem in line for line in t.check({})), "a template check names it too"


def config(tmp_path: Path, kinds: dict[str, object] | None = None) -> Path:
    path = tmp_path / "notifyd.toml"
    path.write_text(tomli_w.dumps({
        "templates": {"folder": "t"},
        "channels": {"mail": {"type": "log", "medium": "email"}},
        "kinds": kinds or {"mention_digest": {"category": "social",
                                              "ladder": [{"channel": "mail"}]}}}))
    return path


def test_a_name_for_what_the_config_does_not_have_stops_the_start(tmp_path: Path) -> None:
    folder(tmp_path, **{"names/fr.toml": '[kinds.mention]\ntitle = "Mentions"\n\n'
                                         '[categories.socail]\ntitle = "Conversations"\n'})
    _, problems = load_templates(load_config(config(tmp_path)))
    assert problems == ["names/fr.toml: kinds.mention: the config has no kind 'mention'",
                        "names/fr.toml: categories.socail: the config has no category 'socail'"]


def test_every_template_gets_the_kind_and_category_names_of_the_locale_it_renders(
        tmp_path: Path) -> None:
    folder(tmp_path, **{f"mention_digest/de/{n}": s for n, s in FOOTER.items()})
    t, problems = load_templates(load_config(config(tmp_path)))
    assert t is not None and problems == []
    assert t.render("mention_digest", "email", "de-AT", {}).parts["text"] == (
        "Erwähnungen, einmal am Tag | None | Unterhaltungen | Was andere Ihnen schreiben.")
    assert t.render("mention_digest", "email", "fr", {}).parts == {
        "subject": "Mentions, once a day",
        "text": "Mentions, once a day | Everything people said to you, in one email. | "
                "Conversations | None"}


def test_names_follow_the_locale_rendered_not_the_one_asked(tmp_path: Path) -> None:
    """The kind has English templates only: a German reader gets English words throughout,
    never an English message with a German footer."""
    folder(tmp_path)
    t, _ = load_templates(load_config(config(tmp_path)))
    assert t is not None
    assert t.render("mention_digest", "email", "de", {}).parts["subject"] == \
        "Mentions, once a day"


def test_without_names_a_template_gets_the_identifiers_made_readable(tmp_path: Path) -> None:
    write(tmp_path / "t", {f"mention_digest/en/{n}": s for n, s in FOOTER.items()})
    t = read_templates(load_config(config(tmp_path)))
    assert t.render("mention_digest", "email", None, {}).parts["text"] == (
        "Mention digest | None | Social | None")


def test_the_version_and_fingerprint_follow_the_names_files(tmp_path: Path) -> None:
    base = folder(tmp_path)
    before = Templates(base)
    version = before.render("mention_digest", "email", "en", {}).version
    (base / "names/de.toml").write_text(NAMES_DE.replace("Unterhaltungen", "Gespräche"))
    after = Templates(base)
    assert after.fingerprint != before.fingerprint  # a reload says "templates"
    # en's templates never show German names: their version stays
    assert after.render("mention_digest", "email", "en", {}).version == version
    (base / "names/en.toml").write_text(NAMES_EN.replace("Conversations", "Threads"))
    assert Templates(base).render("mention_digest", "email", "en", {}).version != version
    plain = write(tmp_path / "plain", {f"k/en/{n}": s for n, s in EMAIL.items()})
    assert Templates(plain).render("k", "email", "en", {"name": "A"}).version == Templates(
        write(plain, {"names/README.txt": "not a names file"})).render(
        "k", "email", "en", {"name": "A"}).version


def test_the_starter_footer_names_the_kind_and_category_in_each_language(
        tmp_path: Path) -> None:
    (tmp_path / "notifyd.toml").write_text(render_starter())
    write_starter(tmp_path / "templates")
    cfg = load_config(tmp_path / "notifyd.toml")
    t, problems = load_templates(cfg)
    assert t is not None and problems == []
    extra = {"notification_id": "n1", "unsubscribe_url": "https://u.example/x"}
    for locale, kind, category in (("en", "Failed payment", "Billing"),
                                   ("de-AT", "Fehlgeschlagene Zahlung", "Rechnungen"),
                                   ("fr", "Failed payment", "Billing")):
        mail = t.render("payment_failed", "email", locale, SAMPLE, extra=extra).parts
        for part in ("text", "html"):
            assert f"({kind})" in mail[part] and category in mail[part], (locale, part)
            assert "payment_failed" not in mail[part] and "billing" not in mail[part]


def test_the_docs_names_file_reads_as_it_says(tmp_path: Path) -> None:
    write(tmp_path / "t", {"names/en.toml": example("names file").code,
                           **{f"mention_digest/en/{n}": s for n, s in FOOTER.items()}})
    t, problems = load_templates(load_config(config(tmp_path)))
    assert t is not None and problems == []
    assert t.names.kind("mention_digest", "de-AT") == Name(
        "Mentions, once a day", "Everything people said to you, in one email.")
    assert t.names.category("social", None) == Name("Conversations")
