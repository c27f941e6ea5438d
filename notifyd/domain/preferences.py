"""A person's preferences as the API and the unsubscribe page see them: a switch per category and
medium, and one global opt-out. The claim reads them (policy._preference); this module only
checks what is written and shows what holds.

PUT replaces the whole document, so a page that shows them can save what it shows; PATCH
applies a JSON merge patch to what the person chose. Each change makes a new version, the
document's ETag: a write with If-Match naming an older one (or a PUT body's `version`, for a page
that cannot set headers) is refused, so two pages editing at once conflict instead of
overwriting each other. A PUT may set the time zone and quiet hours (the profile's) with them, or
leave them as they are. A category that may not be turned off (`optional = false`: one-time
codes, security alerts) is shown but refuses a change; a global opt-out never silences a
transactional kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from notifyd.core.catalog import MEDIUMS, Catalog
from notifyd.core.errors import DomainError
from notifyd.core.models import Recipient
from notifyd.core.names import Name, Names
from notifyd.core.records import Hours
from notifyd.core.text import whole_number
from notifyd.domain.recipients import parse_quiet_hours, parse_timezone
from notifyd.domain.validate import merge_patch
from notifyd.shapes import people as shapes

UNNAMED = Names()  # no names files: each category's identifier made readable


@dataclass(frozen=True)
class Change:
    """A PUT body: the document, the version it was made over (None: any), and the time zone
    and quiet hours when it names either (None: as they are)."""

    document: dict[str, Any]
    version: int | None
    hours: Hours | None


def parse_change(catalog: Catalog, data: shapes.PreferencesRequest,
                 now: Recipient | None) -> Change:
    """A PUT body, its shape checked by its Struct; a DomainError names the first field the
    catalog refuses. A time zone or quiet hours left out of a body that names the other stay
    as they are (`now`)."""
    hours = None
    if data.timezone is not msgspec.UNSET or data.quiet_hours is not msgspec.UNSET:
        zone = now.timezone if now else None
        if data.timezone is not msgspec.UNSET:
            zone = parse_timezone(data.timezone)
        start, end = (now.quiet_start, now.quiet_end) if now else (None, None)
        if data.quiet_hours is not msgspec.UNSET:
            start, end = parse_quiet_hours(data.quiet_hours)
        hours = Hours(zone, start, end)
    document = {"opt_out": data.opt_out, "categories": msgspec.to_builtins(data.categories)}
    return Change(parse(catalog, document), data.version, hours)


def parse(catalog: Catalog, data: dict[str, Any]) -> dict[str, Any]:
    """The preferences document ({opt_out, categories}) of a valid shape, checked against the
    catalog: every category one it has, none that may not be turned off turned off."""
    known = sorted(catalog.categories)
    out: dict[str, dict[str, bool]] = {}
    for name, switches in data.get("categories", {}).items():
        where = f"categories.{name}"
        if name not in known:
            raise DomainError("invalid_field", f"unknown category {name!r} (known: "
                              f"{', '.join(known)})", where)
        if not catalog.category(name).optional and not all(switches.values()):
            raise DomainError("invalid_field", f"{name} may not be turned off (one-time codes "
                              "and security alerts always go out)", where)
        out[name] = dict(sorted(switches.items()))
    return {"opt_out": bool(data.get("opt_out", False)), "categories": out}


def check_patch(catalog: Catalog, patch: dict[str, Any]) -> None:
    """A merge patch (shapes.people.PreferencesPatch, as JSON), before any If-Match decides:
    what it sets (its members less the nulls, as it would write on nothing) is what a PUT
    takes."""
    parse(catalog, merge_patch({}, patch))


def patched(catalog: Catalog, r: Recipient | None, patch: dict[str, Any]) -> dict[str, Any]:
    """What the person chose with a JSON merge patch applied (RFC 7396: null puts a switch, or
    a whole category, back to its default), checked as a PUT body is. Choices the config no
    longer takes (a category gone, or made one that may not be turned off) are dropped first:
    they decide nothing, and a patch that does not name them should not fail on them."""
    prefs = r.preferences if r is not None else {}
    chosen = {name: switches for name, switches in (prefs.get("categories") or {}).items()
              if name in catalog.categories and catalog.category(name).optional}
    current = {"opt_out": bool(prefs.get("opt_out", False)), "categories": chosen}
    return parse(catalog, merge_patch(current, patch))


def etag(version: int) -> str:
    """The preferences' ETag: their version, a strong entity tag."""
    return f'"{version}"'


def if_match(header: str | None) -> frozenset[int] | None:
    """The versions an If-Match header names (None: no condition, or "*"). A weak tag or one
    that is not a version of ours names none, so it matches nothing (RFC 9110: If-Match
    compares strongly)."""
    if header is None or header.strip() == "*":
        return None
    versions = set()
    for tag in header.split(","):
        tag = tag.strip()
        number = whole_number(tag[1:-1]) if len(tag) > 2 else None
        if number is not None and tag == etag(number):  # exactly ours: no W/, no leading 0
            versions.add(number)
    return frozenset(versions)


def view(catalog: Catalog, r: Recipient | None, names: Names = UNNAMED) -> shapes.Preferences:
    """What holds now: the person's switches over each category's defaults, and the version;
    each category with its name in the person's locale and the media its kinds can use."""
    prefs = r.preferences if r is not None else {}
    chosen = prefs.get("categories") or {}
    locale = r.locale if r is not None else None
    shown = {}
    for name, cat in sorted(catalog.categories.items()):
        mine = chosen.get(name, {})
        called = names.category(name, locale)
        shown[name] = shapes.CategoryView(
            optional=cat.optional, title=called.title, description=called.description,
            media=list(cat.media), **{m: bool(mine.get(m, cat.defaults[m])) if cat.optional
                                      else True for m in MEDIUMS})
    quiet = shapes.QuietHours(start=r.quiet_start, end=r.quiet_end) \
        if r and r.quiet_start is not None and r.quiet_end is not None else None
    return shapes.Preferences(version=r.pref_version if r is not None else 0,
                              opt_out=bool(prefs.get("opt_out", False)), categories=shown,
                              timezone=r.timezone if r is not None else None,
                              quiet_hours=quiet)


def names_view(catalog: Catalog, names: Names, locale: str | None) -> shapes.Names:
    """Every kind's and category's name as a person of `locale` reads it."""
    def shown(name: Name) -> shapes.Name:
        return shapes.Name(title=name.title, description=name.description)

    return shapes.Names(locale=locale,
                        kinds={k: shown(names.kind(k, locale)) for k in sorted(catalog.kinds)},
                        categories={c: shown(names.category(c, locale))
                                    for c in sorted(catalog.categories)})


def unsubscribed(r: Recipient | None, category: str) -> dict[str, Any]:
    """The preferences with every medium of `category` off (what one-click unsubscribe does)."""
    prefs = dict(r.preferences) if r is not None else {}
    chosen = dict(prefs.get("categories") or {})
    chosen[category] = {m: False for m in MEDIUMS}
    return {"opt_out": bool(prefs.get("opt_out", False)), "categories": chosen}

