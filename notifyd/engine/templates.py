"""Each kind's words per medium and locale: jinja2 files read and compiled once at start, rendered
on the send path (sender.py, before a step is frozen) and for a preview (engine/preview.py). The
daemon refuses to start while check() names a problem; renders never touch the disk.

Layout: <folder>/<kind>/<locale>/<medium>.<part>.j2, e.g. payment_failed/de/email.subject.j2,
and the names a person reads for kinds and categories in <folder>/names/<locale>.toml
(engine/names.py), which every template gets as kind_title, category_title and their
descriptions.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import jinja2
from jinja2 import nodes
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from notifyd.channels.base import RenderError
from notifyd.core.names import LOCALE_RE, Names, locale_chain, locale_key
from notifyd.engine.names import NamesFiles, read_names

DEFAULT_LOCALE = "en"
DEFAULT_MAX_OUTPUT_BYTES = 131_072  # per rendered part; larger is an error, never cut short
VERSION_HEX = 12
SUFFIX = ".j2"
LAYOUT = "<kind>/<locale>/<medium>.<part>.j2"
# Set by the sender beside the params; a param of the same name loses to them.
RESERVED = ("kind", "notification_id", "user_id", "locale", "unsubscribe_url", "preferences_url",
            "kind_title", "kind_description", "category_title", "category_description")


class Parts(NamedTuple):
    required: tuple[str, ...]
    optional: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return self.required + self.optional


MEDIA: Mapping[str, Parts] = MappingProxyType({
    "email": Parts(("subject", "text"), ("html",)),
    "sms": Parts(("text",)),
    "push": Parts(("title", "body")),
    "chat": Parts(("text",), ("title",)),  # title: a Discord embed's or a Teams card's heading
    "inbox": Parts(("title",), ("body",)),
})
ONE_LINE = frozenset({("email", "subject")})  # a line break in a mail header injects headers
_NOT_ALONE = (nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)


class OutputTooLarge(ValueError):
    """A part rendered past max_output_bytes: a message cut short would mislead, so none is sent."""


class LineBreakInSubject(ValueError):
    """An email subject rendered with CR or LF."""


class TemplateError(RenderError):
    """A template file could not give its part; `line` is its line when the error shows one."""

    def __init__(self, template: str, error: BaseException) -> None:
        super().__init__(template, error)
        self.line = _line_of(error, template)


@dataclass(frozen=True)
class RenderedContent:
    parts: dict[str, str]  # part -> text, in MEDIA order; optional parts only when present
    version: str  # VERSION_HEX of sha256 over the files' names and bytes
    locale: str  # the locale folder rendered
    files: tuple[str, ...]  # relative to the folder


@dataclass(frozen=True)
class _File:
    path: str  # relative to the folder, "/"-separated: how every message names it
    data: bytes  # as read: the version hashes these, so it names exactly what was compiled
    template: jinja2.Template | None
    error: Exception | None  # why it did not compile (template is None)


@dataclass(frozen=True)
class _Set:
    """One locale folder's complete parts for one medium: what a render uses, whole."""

    locale: str
    parts: tuple[tuple[str, _File], ...]
    version: str

    @property
    def files(self) -> tuple[str, ...]:
        return tuple(f.path for _, f in self.parts)


class _Sandbox(ImmutableSandboxedEnvironment):
    """No attribute escapes, no mutation of params, and no one expression that builds a huge
    value before the output cap could see it ("x" * 10**9, 9**9**9)."""

    intercepted_binops = frozenset({"*", "**"})

    def __init__(self, max_output_bytes: int) -> None:
        super().__init__(
            undefined=jinja2.StrictUndefined, autoescape=_is_html, auto_reload=False,
            keep_trailing_newline=True,  # one trailing newline is dropped from the output instead
            trim_blocks=True, lstrip_blocks=True)  # a {% %} line leaves no blank line in text
        self.max_output_bytes = max_output_bytes

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        cap = self.max_output_bytes
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, str | list | tuple) and isinstance(n, int) and len(seq) * n > cap:
                    raise OutputTooLarge(f"repeating {len(seq)} items {n} times")
        elif (isinstance(left, int) and isinstance(right, int) and abs(left) > 1
              and right * abs(left).bit_length() > 4 * cap):  # more than cap decimal digits
            raise OutputTooLarge(f"a power of {right} digits' worth")
        return super().call_binop(context, operator, left, right)


class Templates:
    """Every template under `folder`, read and compiled once; render() and check() use only
    what is in memory."""

    def __init__(self, folder: Path, default_locale: str = DEFAULT_LOCALE,
                 max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
                 categories: Mapping[str, str] | None = None) -> None:
        if max_output_bytes < 1:
            raise ValueError("max_output_bytes must be at least 1")
        self.folder = folder
        self.default_locale = default_locale
        self.max_output_bytes = max_output_bytes
        # kind -> its preference category (one not in it: its own name), for category_title
        self.categories: Mapping[str, str] = dict(categories or {})
        self._names = NamesFiles(Names(default_locale=default_locale))
        self._env = _Sandbox(max_output_bytes)
        self._problems: list[str] = []
        self._locales: dict[tuple[str, str], str] = {}  # (kind, locale key) -> folder name
        self._files: dict[tuple[str, str, str], dict[str, _File]] = {}  # (kind, key, medium)
        self._sets: dict[tuple[str, str, str], _Set] = {}
        self._load()

    @property
    def fingerprint(self) -> str:
        """A hash over every template file read, its path and bytes: two loads of the same
        files agree, so a reload can say whether any template changed."""
        digest = hashlib.sha256()
        for files in self._files.values():
            for file in files.values():
                _digest(digest, file.path, file.data)
        for path, data in self._names.files.values():
            _digest(digest, path, data)
        return digest.hexdigest()

    @property
    def names(self) -> Names:
        """The kinds' and categories' names per locale, from names/<locale>.toml."""
        return self._names.names

    def unknown_names(self, kinds: Iterable[str], categories: Iterable[str]) -> list[str]:
        """The names files' entries for a kind or category the config does not have."""
        return self._names.unknown(set(kinds), set(categories))

    def check(self, requirements: Mapping[str, Iterable[str]]) -> list[str]:
        """One line per problem, each naming a file relative to the folder; [] means fine.
        `requirements`: kind -> the media it is sent by; each needs the default locale's parts.
        Files that do not compile and half-filled locale folders count for any kind."""
        problems = list(self._problems)
        default = locale_key(self.default_locale)
        for kind, media in requirements.items():
            for medium in media:
                if medium not in MEDIA:
                    problems.append(f"{kind}: unknown medium {medium!r} (one of {', '.join(MEDIA)})")
                elif (kind, default, medium) not in self._files:  # a partial one is named already
                    problems += [f"{path}: missing (kind {kind} is sent by {medium}; the default "
                                 f"locale {self.default_locale} needs every required part)"
                                 for path in self._missing(kind, medium)]
        return list(dict.fromkeys(problems))

    def locales(self, kind: str) -> list[str]:
        """The locale folders `kind` has templates in, as named on disk."""
        return sorted(folder for (k, _), folder in self._locales.items() if k == kind)

    def localized(self, kind: str) -> bool:
        """Whether `kind` has templates in more than one locale: only then does the recipient's
        locale change what renders."""
        return len({key for k, key in self._locales if k == kind}) > 1

    def render(self, kind: str, medium: str, locale: str | None, params: Mapping[str, Any],
               *, extra: Mapping[str, Any] | None = None) -> RenderedContent:
        """The medium's parts from the first complete locale folder of locale_chain(locale).
        Templates see the params, then `extra` (the RESERVED names: notification_id, user_id,
        unsubscribe_url, preferences_url, None unless given), then kind and locale (the folder
        rendered) and the kind's and its category's names in that locale: a later source wins
        over an earlier one with the same name."""
        chosen = self._choose(kind, medium, locale)
        context = {**params, "unsubscribe_url": None, "preferences_url": None, **(extra or {}),
                   "kind": kind, "locale": chosen.locale, **self._named(kind, chosen.locale)}
        parts: dict[str, str] = {}
        for part, file in chosen.parts:
            text = self._render_part(file, context)
            if (medium, part) in ONE_LINE and ("\r" in text or "\n" in text):
                raise TemplateError(file.path, LineBreakInSubject(f"{part} must be one line"))
            parts[part] = text
        return RenderedContent(parts, chosen.version, chosen.locale, chosen.files)

    def _named(self, kind: str, locale: str) -> dict[str, str | None]:
        """kind_title, kind_description, category_title, category_description in `locale`."""
        of_kind = self.names.kind(kind, locale)
        of_category = self.names.category(self.categories.get(kind, kind), locale)
        return {"kind_title": of_kind.title, "kind_description": of_kind.description,
                "category_title": of_category.title,
                "category_description": of_category.description}

    def _choose(self, kind: str, medium: str, locale: str | None) -> _Set:
        if medium not in MEDIA:
            raise ValueError(f"unknown medium {medium!r}; one of {', '.join(MEDIA)}")
        for key in locale_chain(locale, self.default_locale):
            found = self._sets.get((kind, key, medium))
            if found is not None:
                return found
        missing = self._missing(kind, medium)[0]
        raise TemplateError(missing, jinja2.TemplateNotFound(missing))

    def _missing(self, kind: str, medium: str) -> list[str]:
        """The default locale's required files of the medium that are not there."""
        key = locale_key(self.default_locale)
        folder = self._locales.get((kind, key), self.default_locale)
        have = self._files.get((kind, key, medium), {})
        return [f"{kind}/{folder}/{medium}.{p}{SUFFIX}" for p in MEDIA[medium].required
                if p not in have]

    def _render_part(self, file: _File, context: dict[str, Any]) -> str:
        if file.template is None:
            assert file.error is not None
            raise TemplateError(file.path, file.error)
        cap, size, chunks = self.max_output_bytes, 0, []
        try:
            for chunk in file.template.generate(context):
                size += len(chunk)  # characters, never more than bytes: a cheap early stop
                if size > cap + 2:  # + the trailing newline dropped below
                    raise OutputTooLarge(f"more than {cap} bytes")
                chunks.append(chunk)
            text = "".join(chunks)
            text = text[:-2] if text.endswith("\r\n") else text.removesuffix("\n")
            if len(text.encode()) > cap:  # the part as it is sent
                raise OutputTooLarge(f"more than {cap} bytes")
        except Exception as e:  # noqa: BLE001 - whatever a template raises ends its one step
            raise TemplateError(file.path, e) from e
        return text

    def _load(self) -> None:
        if not self.folder.is_dir():
            self._problems.append(f"{self.folder}: the templates folder is not there")
            return
        self._names = read_names(self.folder, self.default_locale)
        self._problems += self._names.problems
        paths = sorted(p for p in self.folder.rglob("*" + SUFFIX)
                       if not any(s.startswith(".") for s in p.relative_to(self.folder).parts))
        for path in paths:
            self._load_file(path)
        for (kind, key, medium), files in self._files.items():
            self._add_set(kind, key, medium, files)

    def _load_file(self, path: Path) -> None:
        rel = path.relative_to(self.folder).as_posix()
        where = rel.split("/")
        medium, _, part = where[-1].removesuffix(SUFFIX).partition(".")
        if len(where) != 3 or part not in MEDIA.get(medium, Parts(())).names:
            names = ", ".join(f"{m}.{p}" for m, ps in MEDIA.items() for p in ps.names)
            self._problems.append(f"{rel}: not a template: expected {LAYOUT} with <medium>.<part> "
                                  f"one of {names}")
            return
        kind, locale = where[0], where[1]
        key = locale_key(locale)
        if not LOCALE_RE.match(locale):
            self._problems.append(f"{rel}: {locale!r} is not a locale folder name (en, de, de-AT)")
            return
        if self._locales.setdefault((kind, key), locale) != locale:
            self._problems.append(f"{rel}: {kind}/{self._locales[kind, key]} is the same locale; "
                                  "keep one folder")
            return
        try:
            data = path.read_bytes()
        except OSError as e:
            self._problems.append(f"{rel}: unreadable: {type(e).__name__}: {e.strerror}")
            return
        template, error = self._compile(rel, data)
        if error is not None:
            self._problems.append(_describe(rel, error))
        self._files.setdefault((kind, key, medium), {})[part] = _File(rel, data, template, error)

    def _compile(self, rel: str, data: bytes) -> tuple[jinja2.Template | None, Exception | None]:
        try:
            tree = self._env.parse(data.decode("utf-8-sig"), rel, rel)
            for node in tree.find_all(_NOT_ALONE):
                raise jinja2.TemplateSyntaxError(
                    "include, extends and import are not supported: each file stands alone, so "
                    "its version covers all it says", node.lineno, rel, rel)
            code = self._env.compile(tree, rel, rel)
        except (UnicodeDecodeError, jinja2.TemplateSyntaxError) as e:
            return None, e
        return self._env.template_class.from_code(self._env, code, self._env.make_globals(None)), None

    def _add_set(self, kind: str, key: str, medium: str, files: dict[str, _File]) -> None:
        locale, parts = self._locales[kind, key], MEDIA[medium]
        missing = [p for p in parts.required if p not in files]
        if missing:  # never mixed with another folder's parts: the whole folder is skipped
            have = ", ".join(f"{medium}.{p}{SUFFIX}" for p in files)
            self._problems += [f"{kind}/{locale}/{medium}.{p}{SUFFIX}: missing (the folder has "
                               f"{have}; it is skipped whole for {medium})" for p in missing]
            return
        chosen = tuple((p, files[p]) for p in parts.names if p in files)
        digest = hashlib.sha256()
        for _, file in chosen:
            _digest(digest, file.path, file.data)
        for chained in locale_chain(locale, self.default_locale):  # the names it may show
            if chained in self._names.files:
                _digest(digest, *self._names.files[chained])
        self._sets[kind, key, medium] = _Set(locale, chosen, digest.hexdigest()[:VERSION_HEX])


def _digest(digest: Any, path: str, data: bytes) -> None:
    """A file into a version or fingerprint: its path and length, then its bytes."""
    digest.update(f"{path}\0{len(data)}\0".encode() + data)


def why(e: RenderError) -> str:
    """What went wrong, for a person: an undefined variable is named ("'invoice' is undefined");
    of any other error only its class, since its text may quote the params' values."""
    if isinstance(e.error, jinja2.UndefinedError):
        return f"{type(e.error).__name__}: {e.error}"
    return type(e.error).__name__


def _is_html(name: str | None) -> bool:
    return name is not None and name.endswith(".html" + SUFFIX)


def _describe(rel: str, e: Exception) -> str:
    if isinstance(e, jinja2.TemplateSyntaxError):
        return f"{rel}: {type(e).__name__} at line {e.lineno}: {e.message}"
    if isinstance(e, UnicodeDecodeError):
        return f"{rel}: {type(e).__name__}: not UTF-8 at byte {e.start}"
    return f"{rel}: {type(e).__name__}"


def _line_of(error: BaseException, template: str) -> int | None:
    """The template's line: a syntax error says it; a render error's traceback holds a frame
    that jinja2 rewrote to the template file."""
    if isinstance(error, jinja2.TemplateSyntaxError):
        return error.lineno
    line, tb = None, error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == template:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line
