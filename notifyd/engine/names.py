"""The names files of the templates folder: names/<locale>.toml, one per language, giving the
kinds' and categories' titles and descriptions a person reads (core/names.py chooses among them).
They sit with the templates because that is where a translator works: translating into German
is the kind folders' de/ and names/de.toml, nothing in the operator's config.

    [kinds.payment_failed]
    title = "Fehlgeschlagene Zahlungen"
    description = "Wenn wir eine Rechnung nicht einziehen konnten."

    [categories.billing]
    title = "Rechnungen"

Read once with the templates, at start and at a reload; each problem names its file (and the
entry), and the daemon refuses to start while there is one, as with a template.
"""

from __future__ import annotations

import tomllib
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from notifyd.core.names import CATEGORIES, KINDS, LOCALE_RE, Name, Names, locale_key

FOLDER = "names"  # beside the kind folders; a names file is <locale>.toml in it
TITLE_MAX = 80  # characters: a row heading of the preference centre, an email footer's words
DESCRIPTION_MAX = 300
KEYS = ("title", "description")


@dataclass(frozen=True)
class NamesFiles:
    """What names/ holds: the names, the files read (path relative to the templates folder,
    bytes: for the templates' fingerprint and versions) and what is wrong with them."""

    names: Names = field(default_factory=Names)
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # locale key -> path, bytes
    entries: tuple[tuple[str, str, str], ...] = ()  # (path, table, identifier), each named
    problems: tuple[str, ...] = ()

    def unknown(self, kinds: Collection[str], categories: Collection[str]) -> list[str]:
        """Entries that name no kind or category of the config: a typo would never show."""
        known = {KINDS: kinds, CATEGORIES: categories}
        said = {KINDS: "kind", CATEGORIES: "category"}
        return [f"{path}: {table}.{name}: the config has no {said[table]} {name!r}"
                for path, table, name in self.entries if name not in known[table]]


def read_names(folder: Path, default_locale: str) -> NamesFiles:
    """Every names/<locale>.toml under the templates `folder`; none is no problem (each name
    is then its identifier made readable)."""
    where = folder / FOLDER
    if not where.is_dir():
        return NamesFiles(Names(default_locale=default_locale))
    by_locale: dict[str, dict[tuple[str, str], Name]] = {}
    files: dict[str, tuple[str, bytes]] = {}
    entries: list[tuple[str, str, str]] = []
    problems: list[str] = []
    for path in sorted(p for p in where.glob("*.toml") if not p.name.startswith(".")):
        rel, locale = f"{FOLDER}/{path.name}", path.name.removesuffix(".toml")
        key = locale_key(locale)
        if not LOCALE_RE.match(locale):
            problems.append(f"{rel}: {locale!r} is not a locale (en, de, de-AT)")
            continue
        if key in files:
            problems.append(f"{rel}: {files[key][0]} is the same locale; keep one file")
            continue
        try:
            data = path.read_bytes()
        except OSError as e:
            problems.append(f"{rel}: unreadable: {type(e).__name__}: {e.strerror}")
            continue
        files[key] = (rel, data)
        table, found, wrong = _parse(rel, data)
        by_locale[key] = table
        entries += found
        problems += wrong
    return NamesFiles(Names(by_locale, default_locale), files, tuple(entries), tuple(problems))


def _parse(rel: str, data: bytes) -> tuple[dict[tuple[str, str], Name],
                                           list[tuple[str, str, str]], list[str]]:
    """One file: its names, the entries it names and its problems (each naming the entry)."""
    try:
        doc = tomllib.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        return {}, [], [f"{rel}: not UTF-8 at byte {e.start}"]
    except tomllib.TOMLDecodeError as e:
        return {}, [], [f"{rel}: not TOML: {e}"]
    names: dict[tuple[str, str], Name] = {}
    entries: list[tuple[str, str, str]] = []
    problems = [f"{rel}: {key}: unknown table (a names file has [{KINDS}.NAME] and "
                f"[{CATEGORIES}.NAME])" for key in doc if key not in (KINDS, CATEGORIES)]
    for table in (KINDS, CATEGORIES):
        section = doc.get(table, {})
        if not isinstance(section, dict):
            problems.append(f"{rel}: {table}: must be a table of [{table}.NAME] entries")
            continue
        for ident, entry in section.items():
            name, wrong = _entry(entry)
            entries.append((rel, table, ident))
            if wrong:
                problems.append(f"{rel}: {table}.{ident}: {wrong}")
            elif name is not None:
                names[table, ident] = name
    return names, entries, problems


def _entry(entry: Any) -> tuple[Name | None, str | None]:
    """An entry's Name, or what is wrong with it."""
    if not isinstance(entry, dict):
        return None, 'must be a table: {title = "...", description = "..."}'
    unknown = [k for k in entry if k not in KEYS]
    if unknown:
        return None, f"{unknown[0]}: unknown key (known: {', '.join(KEYS)})"
    title, description = entry.get("title"), entry.get("description")
    if not isinstance(title, str) or not title.strip():
        return None, "title: needs the words a person reads"
    if len(title) > TITLE_MAX or any(c in title for c in "\r\n"):
        return None, f"title: one line of at most {TITLE_MAX} characters"
    if description is not None and (not isinstance(description, str)
                                    or len(description) > DESCRIPTION_MAX):
        return None, f"description: text of at most {DESCRIPTION_MAX} characters"
    return Name(title.strip(), description.strip() if description and description.strip()
                else None), None
