"""What a reload (SIGHUP) reads and what it may change: the config file and the templates, read
again and checked as a start checks them; the keys only a restart can change, kept at their
running values and each named; and a one-line account of what changed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from notifyd.config import Config
from notifyd.core.errors import ConfigError
from notifyd.engine.render import load_templates
from notifyd.engine.templates import Templates

# What the running objects cannot take: the listening socket (host, port), the HTTP app's body
# limit, the open store, the HTTP server's shutdown timeout and the event loop. A reload keeps
# their running values; every other key takes effect.
RESTART_ONLY = ("server.host", "server.port", "server.max_body_bytes", "store",
                "daemon.grace_sec", "daemon.event_loop")


class Refused(Exception):
    """The new config or its templates cannot run; the message names the key or the file, as
    a start would."""


@dataclass(frozen=True)
class Reread:
    cfg: Config  # the new config, with the restart-only keys at their running values
    templates: Templates | None
    waiting: list[str]  # restart-only keys the file changed: they wait for the next restart
    changes: list[str]  # what takes effect, one entry each (see summary)

    def summary(self) -> str:
        """"N changes (kinds: b added, a changed; scanner.poll_interval_sec; templates)"."""
        if not self.changes:
            return "no changes"
        grouped: dict[str, list[str]] = {}
        for change in self.changes:
            head, _, item = change.partition(": ")
            grouped.setdefault(head, []).extend([item] if item else [])
        n = len(self.changes)
        return f"{n} change{'s' if n != 1 else ''} (" + "; ".join(
            f"{head}: {', '.join(items)}" if items else head
            for head, items in grouped.items()) + ")"


def templates_problem(problems: list[str]) -> str:
    """The first of the templates' problems, as start-up and a reload name it."""
    more = f" (and {len(problems) - 1} more: notifyd templates check lists them)" \
        if len(problems) > 1 else ""
    return f"templates: {problems[0]}{more}"


def reread(load: Callable[[], Config], running: Config,
           templates: Templates | None) -> Reread:
    """The config `load` gives and its templates, checked whole before anything is used;
    Refused names the first problem. Blocking (files, compiling templates): run it off the
    event loop."""
    try:
        new = load()
        new.catalog  # noqa: B018 - compiled here, off the event loop
    except ConfigError as e:
        raise Refused(f"config error: {e}") from None
    except OSError as e:
        raise Refused(f"cannot read the config: {e}") from None
    try:
        fresh, problems = load_templates(new)
    except OSError as e:
        raise Refused(f"templates: cannot read the folder: {e}") from None
    if problems:
        raise Refused(templates_problem(problems))
    waiting = [key for key in differences(running, new) if restart_only(key)]
    for key in RESTART_ONLY:
        new = _keep(new, running, key.split("."))
    changes = [_described(key, running, new) for key in differences(running, new)]
    if _fingerprint(fresh) != _fingerprint(templates):
        changes.append("templates")
    return Reread(new, fresh, waiting, changes)


def restart_only(key: str) -> bool:
    return any(key == k or key.startswith(f"{k}.") for k in RESTART_ONLY)


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """The dotted keys whose values differ: each key of a table (store.sqlite.synchronous), each
    entry of a table of named entries as a whole (kinds.alerts), any other value as a whole
    (limits)."""
    if old == new:
        return []
    if isinstance(old, dict) and isinstance(new, dict):
        return [f"{where}.{k}" for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)]
    if dataclasses.is_dataclass(old) and type(old) is type(new):
        return [key for f in dataclasses.fields(old) for key in differences(
            getattr(old, f.name), getattr(new, f.name), f"{where}.{f.name}" if where else f.name)]
    return [where]


def _described(key: str, old: Config, new: Config) -> str:
    """kinds.b -> "kinds: b added" (or removed, changed); a table's key stays as it is."""
    section, _, name = key.partition(".")
    before, after = getattr(old, section), getattr(new, section)
    if not isinstance(before, dict) or not isinstance(after, dict):
        return key
    how = "added" if name not in before else "removed" if name not in after else "changed"
    return f"{section}: {name} {how}"


def _keep(new: Any, running: Any, path: list[str]) -> Any:
    """`new` with the value at `path` taken from `running`."""
    head, *rest = path
    value = getattr(running, head)
    if rest:
        value = _keep(getattr(new, head), value, rest)
    return dataclasses.replace(new, **{head: value})


def _fingerprint(templates: Templates | None) -> str | None:
    return templates.fingerprint if templates is not None else None
