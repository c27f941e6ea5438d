"""A person's preferences as the API and the unsubscribe page see them: a switch per category and
medium, and one global opt-out. The claim reads them (policy._preference); this module only
checks what is written and shows what holds.

PUT replaces the whole document, so a page that shows them can save what it shows; with the
`version` it showed, the save is refused if another change came first (two open tabs). The time
zone and quiet hours (the profile's) may be set with them, or left as they are. A category that
may not be turned off (`optional = false`: one-time codes, security alerts) is shown but refuses
a change; a global opt-out never silences a transactional kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from notifyd.core.catalog import MEDIUMS, Catalog
from notifyd.core.errors import DomainError
from notifyd.core.models import Recipient
from notifyd.core.records import Hours
from notifyd.domain.recipients import parse_quiet_hours, parse_timezone
from notifyd.domain.validate import check_fields

DOCUMENT = frozenset({"opt_out", "categories"})
FIELDS = DOCUMENT | {"version", "timezone", "quiet_hours"}


@dataclass(frozen=True)
class Change:
    """A PUT body: the document, the version it was made over (None: any), and the time zone
    and quiet hours when it names either (None: as they are)."""

    document: dict[str, Any]
    version: int | None
    hours: Hours | None


def parse_change(catalog: Catalog, data: dict[str, Any], now: Recipient | None) -> Change:
    """A PUT body; a DomainError names the first wrong field. A time zone or quiet hours left
    out of a body that names the other stay as they are (`now`)."""
    check_fields(data, FIELDS)
    version = data.get("version")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)
                                or not 0 <= version < 2**62):
        raise DomainError("invalid_field", "version must be the version the page read (a whole "
                          "number), or left out", "version")
    hours = None
    if "timezone" in data or "quiet_hours" in data:
        zone = parse_timezone(data["timezone"]) if "timezone" in data else (
            now.timezone if now else None)
        start, end = parse_quiet_hours(data["quiet_hours"]) if "quiet_hours" in data else (
            (now.quiet_start, now.quiet_end) if now else (None, None))
        hours = Hours(zone, start, end)
    document = {k: v for k, v in data.items() if k in DOCUMENT}
    return Change(parse(catalog, document), version, hours)


def parse(catalog: Catalog, data: dict[str, Any]) -> dict[str, Any]:
    """The preferences document ({opt_out, categories}); a DomainError names the first wrong
    field."""
    check_fields(data, DOCUMENT)
    opt_out = data.get("opt_out", False)
    if not isinstance(opt_out, bool):
        raise DomainError("invalid_field", "opt_out must be true or false", "opt_out")
    chosen = data.get("categories", {})
    if not isinstance(chosen, dict):
        raise DomainError("invalid_field", "categories must be an object: {category: {medium: "
                       "true|false}}", "categories")
    known = sorted(catalog.categories)
    out: dict[str, dict[str, bool]] = {}
    for name, switches in chosen.items():
        where = f"categories.{name}"
        if name not in known:
            raise DomainError("invalid_field", f"unknown category {name!r} (known: "
                           f"{', '.join(known)})", where)
        if not isinstance(switches, dict) or not all(
                m in MEDIUMS and isinstance(v, bool) for m, v in switches.items()):
            raise DomainError("invalid_field", f"{where} must map mediums ({', '.join(MEDIUMS)}) "
                           "to true or false", where)
        if not catalog.category(name).optional and not all(switches.values()):
            raise DomainError("invalid_field", f"{name} may not be turned off (one-time codes "
                           "and security alerts always go out)", where)
        out[name] = dict(sorted(switches.items()))
    return {"opt_out": opt_out, "categories": out}


def view(catalog: Catalog, r: Recipient | None) -> dict[str, Any]:
    """What holds now: the person's switches over each category's defaults, and the version."""
    prefs = r.preferences if r is not None else {}
    chosen = prefs.get("categories") or {}
    shown = {}
    for name, cat in sorted(catalog.categories.items()):
        mine = chosen.get(name, {})
        shown[name] = {"optional": cat.optional, **{
            m: bool(mine.get(m, cat.defaults[m])) if cat.optional else True for m in MEDIUMS}}
    quiet = {"start": r.quiet_start, "end": r.quiet_end} if r and r.quiet_start else None
    return {"version": r.pref_version if r is not None else 0,
            "opt_out": bool(prefs.get("opt_out", False)), "categories": shown,
            "timezone": r.timezone if r is not None else None, "quiet_hours": quiet}


def unsubscribed(r: Recipient | None, category: str) -> dict[str, Any]:
    """The preferences with every medium of `category` off (what one-click unsubscribe does)."""
    prefs = dict(r.preferences) if r is not None else {}
    chosen = dict(prefs.get("categories") or {})
    chosen[category] = {m: False for m in MEDIUMS}
    return {"opt_out": bool(prefs.get("opt_out", False)), "categories": chosen}

