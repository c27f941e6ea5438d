"""The names a person reads for kinds and categories, per locale: what the preference centre, the
unsubscribe page, the inbox widget and the templates (`kind_title`, `category_title`) show in
place of an identifier such as `mention_digest`. engine/names.py reads them from the templates
folder (names/<locale>.toml); this module only chooses among them.

A name is looked up along the locale's chain (de-AT, de, then the default locale), taken whole
(its title and description from one locale, never mixed), and when no locale has it the
identifier is made readable ("mention_digest" -> "Mention digest"), so no page ever shows the
identifier itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

KINDS, CATEGORIES = "kinds", "categories"  # the two tables of a names file
DEFAULT_LOCALE = "en"
LOCALE_RE = re.compile(r"^[A-Za-z]{2,8}([-_][A-Za-z0-9]{1,8})*$")  # a folder's or file's locale


@dataclass(frozen=True, slots=True)
class Name:
    title: str
    description: str | None = None  # None: the names file gives none


def locale_key(locale: str) -> str:
    """'de_AT.UTF-8' -> 'de-at': how locale folders, names files and recipients' locales are
    compared."""
    return re.split(r"[.@]", locale.strip(), maxsplit=1)[0].replace("_", "-").lower()


def locale_chain(locale: str | None, default: str) -> list[str]:
    """The locale keys tried in order: 'de-AT' -> de-at, de, then the default."""
    tags = locale_key(locale).split("-") if locale else []
    keys = ["-".join(tags[:n]) for n in range(len(tags), 0, -1)] + [locale_key(default)]
    return list(dict.fromkeys(k for k in keys if k))


def humanised(identifier: str) -> str:
    """An identifier as words: 'mention_digest' -> 'Mention digest', 'ops.alerts' -> 'Ops
    alerts'; what a page shows for a kind or category no names file names."""
    words = " ".join(w for w in re.split(r"[_.\-\s]+", identifier) if w)
    return words[:1].upper() + words[1:] if words else identifier


@dataclass(frozen=True)
class Names:
    """Every names file read: locale key -> (table, identifier) -> Name."""

    by_locale: Mapping[str, Mapping[tuple[str, str], Name]] = field(default_factory=dict)
    default_locale: str = DEFAULT_LOCALE

    def kind(self, name: str, locale: str | None) -> Name:
        return self._find(KINDS, name, locale)

    def category(self, name: str, locale: str | None) -> Name:
        return self._find(CATEGORIES, name, locale)

    def _find(self, table: str, name: str, locale: str | None) -> Name:
        for key in locale_chain(locale, self.default_locale):
            found = self.by_locale.get(key, {}).get((table, name))
            if found is not None:
                return found
        return Name(humanised(name))
