"""The config checked: one checker walks every table and reads what its keys declare (bounds
beside each key, core/fields) and the table's own rules; then the few rules across tables. The
first problem is raised as a ConfigError naming the key, never its value."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from notifyd.config.policy import BUILTIN_LOG, SEND_SLACK_SEC
from notifyd.core.errors import ConfigError
from notifyd.core.fields import Bounds, Problems, declared_problems

if TYPE_CHECKING:
    from notifyd.config.root import Config


def validate(cfg: Config) -> Config:
    """`cfg` checked, with the built-in `log` channel added unless a channel has that name."""
    if "log" not in cfg.channels:  # it writes a line: a second is ample, whatever the lease
        cfg = dataclasses.replace(cfg, channels={**cfg.channels, "log": BUILTIN_LOG})
    problems = table_problems(cfg, "") or across(cfg)
    if problems:
        key, problem = problems[0]
        raise ConfigError(f"{key}: {problem}")
    return cfg


def table_problems(table: Any, path: str) -> Problems:
    """What `table` (a dataclass of declared keys) and every table in it say is wrong, keyed by
    their dotted path: the table's own first, then each inner table's in declaration order."""
    out = [(_join(path, key), why) for key, why in _own(table)]
    for f in dataclasses.fields(table):
        value = getattr(table, f.name)
        if f.metadata.get("type_settings"):  # a channel type's keys sit in the channel's table
            out += table_problems(value, path) if dataclasses.is_dataclass(value) else []
        elif dataclasses.is_dataclass(value):
            out += table_problems(value, _join(path, f.name))
        elif isinstance(value, dict):
            out += _entries(value, _join(path, f.name), f.metadata.get("names"))
        elif isinstance(value, tuple):
            out += [p for i, item in enumerate(value) if dataclasses.is_dataclass(item)
                    for p in table_problems(item, f"{_join(path, f.name)}[{i}]")]
    return out


def _own(table: Any) -> Problems:
    """A table's problems(): its keys' bounds and its rules (core/fields.Checked)."""
    problems = getattr(table, "problems", None)
    if callable(problems):
        return list(problems())
    return declared_problems(table)


def _entries(entries: dict[str, Any], path: str, names: Bounds | None) -> Problems:
    """A table of named entries: each name as `names` bounds it, then each entry's table."""
    out = []
    for name, entry in entries.items():
        why = names.problem(name) if names is not None else None
        out += [(f"{path}.{name}", why)] if why is not None else []
        out += table_problems(entry, f"{path}.{name}") if dataclasses.is_dataclass(entry) else []
    return out


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path and key else path or key


def across(cfg: Config) -> Problems:
    """The rules across tables: what a table names exists, and a send's time fits its lease."""
    out: Problems = []
    lease = cfg.scanner.lease_sec
    for name, ch in cfg.channels.items():
        if ch.timeout_sec + SEND_SLACK_SEC >= lease:
            out.append((f"channels.{name}.timeout_sec",
                        f"must be under scanner.lease_sec - {SEND_SLACK_SEC:g}, or a slow send "
                        "would be taken over while still in flight"))
    for i, lim in enumerate(cfg.limits):
        if lim.kind and lim.kind not in cfg.kinds:
            out.append((f"limits[{i}].kind", f"unknown kind {lim.kind!r}"))
    return out + _kinds_named(cfg)


def _kinds_named(cfg: Config) -> Problems:
    """Each ladder's channels and each digest and event type's kinds are configured."""
    out: Problems = []
    for name, kind in cfg.kinds.items():
        for i, step in enumerate(kind.ladder):
            if step.channel not in cfg.channels:
                out.append((f"kinds.{name}.ladder[{i}].channel",
                            f"unknown channel {step.channel!r} (known: "
                            f"{', '.join(sorted(cfg.channels))})"))
        target = cfg.kinds.get(kind.digest)
        if kind.digest and not (target is not None and target.schedule):
            out.append((f"kinds.{name}.digest",
                        f"{kind.digest!r} is not a digest kind (one with a schedule)"))
    for name, event in cfg.events.items():
        for kind_name in event.kinds:
            if kind_name not in cfg.kinds:
                out.append((f"events.{name}.kinds", f"unknown kind {kind_name!r} (known: "
                                                    f"{', '.join(sorted(cfg.kinds))})"))
            elif cfg.kinds[kind_name].schedule:
                out.append((f"events.{name}.kinds", f"{kind_name!r} is a digest kind: only the "
                                                    "digest scheduler makes those"))
    return out
