"""Templates from real files in tmp_path: layout, locale fallback, versions, the sandbox, the
output cap, check()'s lines, memory-only renders and the starter folder."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path

import jinja2
import pytest
from jinja2.exceptions import SecurityError

from notifyd.channels.base import RenderError
from notifyd.core.catalog import Catalog
from notifyd.engine.preview import PreviewError, preview
from notifyd.engine.starter import write_starter
from notifyd.engine.templates import (
    DEFAULT_MAX_OUTPUT_BYTES,
    MEDIA,
    LineBreakInSubject,
    OutputTooLarge,
    RenderedContent,
    TemplateError,
    Templates,
    locale_chain,
)

EMAIL = {"email.subject.j2": "Hi {{ name }}\n", "email.text.j2": "Text for {{ name }}\n"}
SAMPLE = {"amount": "12,00 €", "invoice": "INV-7", "url": "https://pay.example/i?a=1&b=2"}


def write(folder: Path, files: Mapping[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def one(tmp_path: Path, name: str, source: str, medium_files: dict[str, str] | None = None,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES) -> Templates:
    """A kind 'k' in en with one file `name` (plus `medium_files`)."""
    files: dict[str, str | bytes] = {f"k/en/{n}": s for n, s in (medium_files or {}).items()}
    files[f"k/en/{name}"] = source
    return Templates(write(tmp_path, files), max_output_bytes=max_output_bytes)


def raises(t: Templates, medium: str, params: dict[str, object] | None = None,
           locale: str | None = None) -> TemplateError:
    with pytest.raises(TemplateError) as e:
        t.render("k", medium, locale, params or {})
    assert isinstance(e.value, RenderError)  # the sender records e.template and e.error's class
    return e.value


# --- layout and locale fallback ---

def locales_folder(tmp_path: Path) -> Path:
    files: dict[str, str | bytes] = {}
    for loc in ("en", "de", "de-AT"):
        files |= {f"k/{loc}/{n}": f"{loc}: {s}" for n, s in EMAIL.items()}
    files["k/fr/email.subject.j2"] = "fr: only a subject"  # no text: fr is skipped whole
    return write(tmp_path, files)


@pytest.mark.parametrize(("asked", "used"), [
    ("de-AT", "de-AT"), ("de_AT", "de-AT"), ("DE-at", "de-AT"), ("de_AT.UTF-8", "de-AT"),
    ("de-CH", "de"), ("de", "de"), ("fr", "en"), ("fr-FR", "en"), ("ja", "en"), (None, "en"),
    ("", "en"),
])
def test_locale_fallback_uses_the_first_complete_folder(tmp_path: Path, asked: str | None,
                                                         used: str) -> None:
    r = Templates(locales_folder(tmp_path)).render("k", "email", asked, {"name": "Ann"})
    assert r.locale == used
    assert r.parts == {"subject": f"{used}: Hi Ann", "text": f"{used}: Text for Ann"}
    assert r.files == (f"k/{used}/email.subject.j2", f"k/{used}/email.text.j2")


def test_a_folder_missing_a_required_part_is_skipped_whole_and_named(tmp_path: Path) -> None:
    t = Templates(locales_folder(tmp_path))
    r = t.render("k", "email", "fr", {"name": "Ann"})
    assert (r.locale, r.parts["subject"]) == ("en", "en: Hi Ann")  # not fr's subject with en's text
    assert t.check({"k": ["email"]}) == [
        "k/fr/email.text.j2: missing (the folder has email.subject.j2; it is skipped whole for email)"]


def test_locale_chain() -> None:
    assert locale_chain("zh_Hant_TW", "en") == ["zh-hant-tw", "zh-hant", "zh", "en"]
    assert locale_chain("en-GB", "en") == ["en-gb", "en"]
    assert locale_chain(None, "de") == ["de"]


def test_optional_parts_appear_only_when_there(tmp_path: Path) -> None:
    write(tmp_path, {f"k/en/{n}": s for n, s in EMAIL.items()} | {
        "k/de/email.subject.j2": "S", "k/de/email.text.j2": "T", "k/de/email.html.j2": "<p>H</p>",
        "k/en/inbox.title.j2": "Only a title"})
    t = Templates(tmp_path)
    assert list(t.render("k", "email", "en", {"name": "x"}).parts) == ["subject", "text"]
    assert t.render("k", "email", "de", {}).parts == {"subject": "S", "text": "T", "html": "<p>H</p>"}
    assert t.render("k", "inbox", None, {}).parts == {"title": "Only a title"}
    assert t.check({"k": ["email", "inbox"]}) == []


def test_no_folder_with_the_medium_names_the_default_locale_file(tmp_path: Path) -> None:
    t = Templates(write(tmp_path, {"k/de/sms.text.j2": "nur deutsch"}))
    e = raises(t, "sms", locale="fr")
    assert e.template == "k/en/sms.text.j2"
    assert isinstance(e.error, jinja2.TemplateNotFound)
    with pytest.raises(TemplateError, match=r"^other/en/push.title.j2: TemplateNotFound$"):
        t.render("other", "push", "de", {})
    with pytest.raises(ValueError, match="unknown medium 'fax'"):
        t.render("k", "fax", "de", {})


# --- versions ---

def test_version_is_stable_and_follows_the_content(tmp_path: Path) -> None:
    folder = locales_folder(tmp_path)

    def version(locale: str = "en") -> str:
        return Templates(folder).render("k", "email", locale, {"name": "x"}).version

    first = version()
    assert len(first) == 12 and int(first, 16) >= 0
    assert version() == first  # same bytes, same version, whatever the params
    assert Templates(folder).render("k", "email", "en", {"name": "other"}).version == first
    assert version("de") != first
    (folder / "k/en/email.text.j2").write_text("Text for {{ name }}!\n")
    changed = version()
    assert changed != first
    (folder / "k/en/email.html.j2").write_text("<p>{{ name }}</p>")  # an optional part counts
    assert version() not in (first, changed)


# --- what a template may do ---

def test_an_undefined_variable_names_the_file_and_line(tmp_path: Path) -> None:
    t = one(tmp_path, "sms.text.j2", "Hello\n{{ nobody }}\n")
    e = raises(t, "sms")
    assert (e.template, e.line, type(e.error)) == ("k/en/sms.text.j2", 2, jinja2.UndefinedError)
    assert str(e) == "k/en/sms.text.j2: UndefinedError"
    assert t.render("k", "sms", None, {"nobody": "Bo"}).parts == {"text": "Hello\nBo"}


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",
    "{{ ''.__class__ }}",
    "{{ cycler.__init__.__globals__ }}",
    "{{ items.append(4) }}",
    "{% set x = items.pop() %}{{ x }}",
    "{{ mapping.update({'a': 2}) }}",
])
def test_sandbox_escapes_and_mutations_are_refused(tmp_path: Path, source: str) -> None:
    items, mapping = [1, 2, 3], {"a": 1}
    e = raises(one(tmp_path, "chat.text.j2", source), "chat", {"items": items, "mapping": mapping})
    assert isinstance(e.error, SecurityError)
    assert (items, mapping) == ([1, 2, 3], {"a": 1})


def test_html_is_escaped_and_text_is_not(tmp_path: Path) -> None:
    write(tmp_path, {f"k/en/{n}": s for n, s in EMAIL.items()} |
          {"k/en/email.html.j2": '<a href="{{ url }}">{{ name }}</a>'})
    parts = Templates(tmp_path).render("k", "email", "en", {
        "name": "<b>Tom & \"Jerry\"</b>", "url": "https://x.example/?a=1&b=2"}).parts
    assert parts["html"] == ('<a href="https://x.example/?a=1&amp;b=2">'
                             "&lt;b&gt;Tom &amp; &#34;Jerry&#34;&lt;/b&gt;</a>")
    assert parts["subject"] == 'Hi <b>Tom & "Jerry"</b>'
    assert parts["text"] == 'Text for <b>Tom & "Jerry"</b>'


def test_reserved_names_win_over_params(tmp_path: Path) -> None:
    t = one(tmp_path, "sms.text.j2",
            "{{ kind }} {{ notification_id }} {{ user_id }} {{ locale }} {{ unsubscribe_url }} {{ a }}")
    params = {"kind": "p", "notification_id": "p", "user_id": "p", "locale": "p", "a": "A"}
    extra = {"notification_id": "n1", "user_id": "u1", "locale": "de-AT"}
    assert t.render("k", "sms", "de-AT", params, extra=extra).parts["text"] == \
        "k n1 u1 en None A"  # locale is the folder rendered; unsubscribe_url None unless given
    both = t.render("k", "sms", None, params, extra=extra | {"unsubscribe_url": "https://u"})
    assert both.parts["text"] == "k n1 u1 en https://u A"


def test_one_trailing_newline_is_dropped_and_tag_lines_leave_no_blank(tmp_path: Path) -> None:
    t = one(tmp_path, "chat.text.j2", "a\n{% if x %}\n  b\n{% endif %}\nc\n\n")
    assert t.render("k", "chat", None, {"x": True}).parts["text"] == "a\n  b\nc\n"
    assert t.render("k", "chat", None, {"x": False}).parts["text"] == "a\nc\n"


# --- the output cap ---

@pytest.mark.parametrize(("source", "params"), [
    ("{% for i in range(1000) %}0123456789{% endfor %}", {}),
    ("{{ big }}", {"big": "x" * 1001}),
    ("{{ big }}", {"big": "é" * 501}),  # 1002 bytes in 501 characters
    ("{{ 'x' * 1000000000 }}", {}),
    ("{{ [0] * 1000000000 }}", {}),
    ("{{ 9 ** (9 ** 9) }}", {}),  # jinja2 reads 9 ** 9 ** 9 as (9 ** 9) ** 9
])
def test_output_over_the_cap_is_an_error_not_a_cut(tmp_path: Path, source: str,
                                                    params: dict[str, object]) -> None:
    e = raises(one(tmp_path, "inbox.title.j2", source, max_output_bytes=1000), "inbox", params)
    assert (e.template, type(e.error)) == ("k/en/inbox.title.j2", OutputTooLarge)


def test_output_at_the_cap_passes(tmp_path: Path) -> None:
    t = one(tmp_path, "inbox.title.j2", "{{ big }}{{ 'ab' * 2 }}{{ 2 ** 10 }}\n", max_output_bytes=1000)
    text = t.render("k", "inbox", None, {"big": "é" * 496}).parts["title"]
    assert len(text.encode()) == 1000 and text.endswith("abab1024")


def test_a_line_break_in_a_subject_is_refused(tmp_path: Path) -> None:
    t = Templates(write(tmp_path, {f"k/en/{n}": s for n, s in EMAIL.items()}))
    for name in ("Ann\r\nBcc: x@evil.example", "Ann\nB", "Ann\rB"):
        e = raises(t, "email", {"name": name})
        assert (e.template, type(e.error)) == ("k/en/email.subject.j2", LineBreakInSubject)
    t2 = one(tmp_path / "2", "push.title.j2", "T {{ name }}", {"push.body.j2": "{{ name }}"})
    assert t2.render("k", "push", None, {"name": "a\nb"}).parts == {"title": "T a\nb", "body": "a\nb"}


# --- check() and loading ---

def test_check_names_each_problem_with_file_and_line(tmp_path: Path) -> None:
    write(tmp_path, {
        "README.txt": "not a template", ".git/x.j2": "{{", "k/en/sms.text.j2": "ok",
        "k/en/push.title.j2": "fine\n{% if x %}\nno end\n",
        "k/en/push.body.j2": "{{ x | no_such_filter }}",
        "k/en/chat.text.j2": "{% include 'other.j2' %}",
        "k/en/inbox.title.j2": b"caf\xe9",
        "k/en/email.subjet.j2": "typo", "k/email.text.j2": "no locale folder",
        "k/en_US/sms.text.j2": "us", "k/en-us/sms.text.j2": "us twice"
    })
    assert Templates(tmp_path).check({"k": ["sms", "email", "fax"], "gone": ["sms"]}) == [
        "k/email.text.j2: not a template: expected <kind>/<locale>/<medium>.<part>.j2 with "
        "<medium>.<part> one of email.subject, email.text, email.html, sms.text, push.title, "
        "push.body, chat.text, chat.title, inbox.title, inbox.body",
        "k/en/chat.text.j2: TemplateSyntaxError at line 1: include, extends and import are not "
        "supported: each file stands alone, so its version covers all it says",
        "k/en/email.subjet.j2: not a template: expected <kind>/<locale>/<medium>.<part>.j2 with "
        "<medium>.<part> one of email.subject, email.text, email.html, sms.text, push.title, "
        "push.body, chat.text, chat.title, inbox.title, inbox.body",
        "k/en/inbox.title.j2: UnicodeDecodeError: not UTF-8 at byte 3",
        "k/en/push.body.j2: TemplateAssertionError at line 1: No filter named 'no_such_filter'.",
        "k/en/push.title.j2: TemplateSyntaxError at line 3: Unexpected end of template. Jinja was "
        "looking for the following tags: 'elif' or 'else' or 'endif'. The innermost block that "
        "needs to be closed is 'if'.",
        "k/en_US/sms.text.j2: k/en-us is the same locale; keep one folder",
        "k/en/email.subject.j2: missing (kind k is sent by email; the default locale en needs "
        "every required part)",
        "k/en/email.text.j2: missing (kind k is sent by email; the default locale en needs "
        "every required part)",
        "k: unknown medium 'fax' (one of email, sms, push, chat, inbox)",
        "gone/en/sms.text.j2: missing (kind gone is sent by sms; the default locale en needs "
        "every required part)",
    ]


def test_a_broken_file_fails_its_render_with_the_compile_error(tmp_path: Path) -> None:
    e = raises(one(tmp_path, "sms.text.j2", "a\n{{ x }"), "sms")
    assert (e.template, e.line, type(e.error)) == ("k/en/sms.text.j2", 2, jinja2.TemplateSyntaxError)


def test_a_missing_folder_is_a_problem(tmp_path: Path) -> None:
    assert Templates(tmp_path / "nope").check({}) == [
        f"{tmp_path / 'nope'}: the templates folder is not there"]


def test_renders_never_read_the_disk(tmp_path: Path) -> None:
    folder = locales_folder(tmp_path / "t")
    t = Templates(folder, default_locale="de")
    before = t.render("k", "email", "de-AT", {"name": "Ann"})
    shutil.rmtree(folder)
    assert t.render("k", "email", "de-AT", {"name": "Ann"}) == before
    assert t.render("k", "email", "fr", {"name": "Ann"}).locale == "de"
    assert t.check({"k": ["email"]}) == [
        "k/fr/email.text.j2: missing (the folder has email.subject.j2; it is skipped whole for email)"]


# --- the starter folder and preview ---

def test_the_starter_passes_check_and_renders_every_medium(tmp_path: Path) -> None:
    written = write_starter(tmp_path)
    assert tmp_path / "README.txt" in written and len(written) == 1 + 2 * 9 + 2
    assert {tmp_path / "names/en.toml", tmp_path / "names/de.toml"} <= set(written)
    t = Templates(tmp_path)
    assert t.check({"payment_failed": list(MEDIA)}) == []
    extra = {"notification_id": "n1", "user_id": "u1", "unsubscribe_url": "https://u.example/x"}
    for locale in ("en", "de", "de-AT"):
        for medium, parts in MEDIA.items():
            r = t.render("payment_failed", medium, locale, SAMPLE, extra=extra)
            assert isinstance(r, RenderedContent) and r.locale == locale[:2]
            assert set(parts.required) <= set(r.parts) <= set(parts.names)
            assert all(text and not text.endswith("\n") for text in r.parts.values())
    html = t.render("payment_failed", "email", "de", SAMPLE, extra=extra).parts["html"]
    assert "https://pay.example/i?a=1&amp;b=2" in html and "https://u.example/x" in html
    text = t.render("payment_failed", "email", "en", SAMPLE, extra=extra | {"unsubscribe_url": None})
    assert "12,00 €" in text.parts["text"] and "Unsubscribe" not in text.parts["text"]


def test_the_starter_overwrites_nothing(tmp_path: Path) -> None:
    write(tmp_path, {"payment_failed/de/sms.text.j2": "mine"})
    with pytest.raises(FileExistsError, match=r"payment_failed/de/sms.text.j2 is there already"):
        write_starter(tmp_path)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()) \
        == ["payment_failed/de/sms.text.j2"]
    assert (tmp_path / "payment_failed/de/sms.text.j2").read_text() == "mine"


def test_preview_names_the_files_and_each_part(tmp_path: Path) -> None:
    write_starter(tmp_path)
    t = Templates(tmp_path)
    out = preview(t, Catalog(), "payment_failed", "push", "de_AT", json.dumps(SAMPLE)).text()
    version = t.render("payment_failed", "push", "de", SAMPLE).version
    assert out == (
        f"payment_failed by push in de (asked de_AT), version {version}\n"
        "  payment_failed/de/push.title.j2\n  payment_failed/de/push.body.j2\n\n"
        "----- title -----\nZahlung fehlgeschlagen\n\n"
        "----- body -----\nWir konnten 12,00 € für Rechnung INV-7 nicht einziehen.\n")
    sampled = preview(t, Catalog(), "payment_failed", "email", "en", json.dumps(SAMPLE))
    assert "preview" in sampled.text()  # sample values for what a send fills in
    with pytest.raises(PreviewError, match=r"^payment_failed/en/sms.text.j2: UndefinedError: "
                                           r"'amount' is undefined$") as e:
        preview(t, Catalog(), "payment_failed", "sms", None, "{}")
    assert e.value.field is None
