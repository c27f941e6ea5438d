"""Config from the environment and from secret files, laid over the config file's tables before
they are checked: NOTIFYD_<SECTION>_<KEY> sets a key, and a secret may be read from a file
(`KEY_file` in the file, NOTIFYD_..._KEY_FILE in the environment). config/load.py describes its
tables (`table_of`) and calls `overlay` from load_config.

A variable's name is the table's path and the key, upper case, joined by "_", with "-" and "."
as "_": NOTIFYD_SERVER_PORT, NOTIFYD_STORE_SQLITE_BUSY_TIMEOUT_MS,
NOTIFYD_WEBHOOKS_DELIVERY_RECEIPT_SECRET. An entry of a table of named entries ([channels.NAME],
[kinds.NAME], ...) has double underscores on both sides of its name, NOTIFYD_CHANNELS__SMS__AUTH_TOKEN,
so a name or a key with "_" in it reads one way only: the key is what follows the last "__". The
name is the file's entry whose name, upper case with "-" and "." as "_", is the same; with none,
the variable makes an entry of that name in lower case.
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from notifyd.core.errors import ConfigError

PREFIX = "NOTIFYD_"
FILE_SUFFIX = "_file"  # beside a secret's key: the path of a file that holds it
LIST = tuple[str, ...]  # a list of text: comma-separated in a variable
SCALARS = (str, int, float, bool, LIST)
TRUE, FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
INTEGER_RE = re.compile(r"^[+-]?[0-9]+$")


@dataclass(frozen=True)
class Key:
    type: Any  # one of SCALARS
    secret: bool = False  # declared with fields.sensitive(): it may come from a file


@dataclass
class Table:
    """One table's keys, as the environment and KEY_file may set them."""

    keys: dict[str, Key] = field(default_factory=dict)
    tables: dict[str, Table] = field(default_factory=dict)  # [store.sqlite], [webhooks.ses]
    # Tables of named entries ([channels.NAME]): the entry's table, given what the file has
    # in it (a channel's keys depend on its type).
    named: dict[str, Callable[[Mapping[str, Any]], Table]] = field(default_factory=dict)
    lists: set[str] = field(default_factory=set)  # lists of tables ([[limits]], a ladder)


def table_of(cls: type[Any], **special: Table | Callable[[Mapping[str, Any]], Table]) -> Table:
    """The documented keys of a settings dataclass; `special` gives the tables (a Table) and
    tables of named entries (a function of the entry) that its types do not describe."""
    hints = typing.get_type_hints(cls)
    table = Table()
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        args = typing.get_args(hint)
        if "doc" not in f.metadata:
            continue
        if f.name in special:
            given = special[f.name]
            if isinstance(given, Table):
                table.tables[f.name] = given
            else:
                table.named[f.name] = given
        elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
            table.tables[f.name] = table_of(hint)
        elif typing.get_origin(hint) is dict and isinstance(args[1], type) \
                and dataclasses.is_dataclass(args[1]):
            table.named[f.name] = _always(table_of(args[1]))
        elif hint in SCALARS:
            table.keys[f.name] = Key(hint, bool(f.metadata.get("secret")))
        else:
            table.lists.add(f.name)
    return table


def _always(entry: Table) -> Callable[[Mapping[str, Any]], Table]:
    return lambda _data: entry


def merged(*tables: Table) -> Table:
    """One table with the keys of each (a channel's shared keys and its type's own)."""
    out = Table()
    for t in tables:
        out.keys.update(t.keys)
        out.tables.update(t.tables)
        out.named.update(t.named)
        out.lists |= t.lists
    return out


def overlay(data: dict[str, Any], root: Table, environ: Mapping[str, str],
            folder: Path | None) -> dict[str, str]:
    """`data` (the file's tables, changed in place) with each secret's KEY_file read (a relative
    path is relative to `folder`) and then each NOTIFYD_ variable set over it. Returns the
    dotted key each variable set, to the variable's name. ConfigError names the key or the
    variable, never a value. Variables of other names (NOTIFYD_CONFIG, NOTIFYD_DB) are left
    alone."""
    read_files(data, root, folder, ())
    origins: dict[str, str] = {}
    # A channel's type first: which other keys it has depends on it.
    for var in sorted(environ, key=lambda name: (not name.endswith("__TYPE"), name)):
        if not var.startswith(PREFIX):
            continue
        hit = _find(root, var[len(PREFIX):], data, (), var)
        if hit is None:
            continue
        path, key, from_file = hit
        dotted = ".".join(path)
        if dotted in origins:
            raise ConfigError(f"{var}: {dotted} is set by {origins[dotted]} too; keep one")
        value = read_secret(Path(environ[var]), var) if from_file else convert(
            environ[var], key.type, var)
        _put(data, path, value, var)
        origins[dotted] = var
    return origins


def variable(path: tuple[str, ...], named: int = -1) -> str:
    """The variable that sets `path`; `named`: the index of the entry name in it, if any."""
    parts = [_upper(p) for p in path]
    if named < 0:
        return PREFIX + "_".join(parts)
    return (PREFIX + "_".join(parts[:named]) + f"__{parts[named]}__" + "_".join(
        parts[named + 1:]))


def convert(text: str, tp: Any, var: str) -> Any:
    """A variable's text as the key's type; ConfigError names the variable, not the text."""
    t = text.strip()
    if tp is str:
        return text
    if tp is bool:
        if t.lower() in TRUE + FALSE:
            return t.lower() in TRUE
        raise ConfigError(f"{var}: expected true or false")
    if tp is int:
        if INTEGER_RE.match(t):
            return int(t)
        raise ConfigError(f"{var}: expected an integer")
    if tp is float:
        try:
            number = float(t)
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or "_" in t:
            raise ConfigError(f"{var}: expected a number")
        return number
    return [item.strip() for item in text.split(",") if item.strip()]  # a list


def read_secret(path: Path, where: str) -> str:
    """A secret file's text without its trailing newline."""
    try:
        return path.read_text(encoding="utf-8").rstrip("\r\n")
    except FileNotFoundError:
        raise ConfigError(f"{where}: no such file: {path}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: {path} is not UTF-8 text") from None
    except OSError as e:
        raise ConfigError(f"{where}: cannot read {path}: {e.strerror or type(e).__name__}") \
            from None


def read_files(data: dict[str, Any], table: Table, folder: Path | None,
               path: tuple[str, ...]) -> None:
    """Each `KEY_file` of a secret in the file's tables replaced by KEY, the file's text."""
    for name in list(data):
        value = data[name]
        key = table.keys.get(name.removesuffix(FILE_SUFFIX))
        if name.endswith(FILE_SUFFIX) and key is not None and key.secret:
            stem = name.removesuffix(FILE_SUFFIX)
            where = ".".join((*path, name))
            if stem in data:
                raise ConfigError(f"{'.'.join((*path, stem))}: set it or {name}, not both")
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: expected the path of a file")
            data[stem] = read_secret(folder / value if folder else Path(value), where)
            del data[name]
        elif name in table.tables and isinstance(value, dict):
            read_files(value, table.tables[name], folder, (*path, name))
        elif name in table.named and isinstance(value, dict):
            for entry_name, entry in value.items():
                if isinstance(entry, dict):
                    read_files(entry, table.named[name](entry), folder, (*path, name, entry_name))


def _upper(name: str) -> str:
    return re.sub(r"[-.]", "_", name).upper()


def _find(table: Table, rest: str, data: Any, path: tuple[str, ...], var: str
          ) -> tuple[tuple[str, ...], Key, bool] | None:
    """The key `rest` (a variable's name past the tables already read) names under `table`."""
    data = data if isinstance(data, dict) else {}
    for name, key in table.keys.items():
        if rest == _upper(name):
            return (*path, name), key, False
        if key.secret and rest == _upper(name) + "_FILE":
            return (*path, name), key, True
    listed = next((name for name in table.lists if rest == _upper(name)), None)
    if listed is not None:
        raise ConfigError(f"{var}: {'.'.join((*path, listed))} is a list of tables; set it in "
                          "the config file")
    for name, entry_of in table.named.items():
        if rest.startswith(_upper(name) + "__"):
            return _find_entry(entry_of, rest[len(name) + 2:], data.get(name), (*path, name),
                               var)
    for name, sub in table.tables.items():
        if rest.startswith(_upper(name) + "_"):
            return _find(sub, rest[len(name) + 1:], data.get(name), (*path, name), var)
    _unknown(table, rest, path, var)
    return None  # not a config key: NOTIFYD_CONFIG, NOTIFYD_DB


def _unknown(table: Table, rest: str, path: tuple[str, ...], var: str) -> None:
    """Nothing under `table` is named `rest`: at the top, not a config key (unless it looks
    like a named entry's); inside a table, a mistake."""
    if not path:
        for name in table.named:
            if rest.startswith(_upper(name) + "_"):
                raise ConfigError(f"{var}: an entry of [{name}] is set by "
                                  f"{PREFIX}{_upper(name)}__NAME__KEY")
        return
    known = sorted(table.keys) + sorted(table.tables) + sorted(table.named)
    raise ConfigError(f"{var}: no such key in [{'.'.join(path)}] (known: {', '.join(known)})")


def _find_entry(entry_of: Callable[[Mapping[str, Any]], Table], rest: str, entries: Any,
                path: tuple[str, ...], var: str) -> tuple[tuple[str, ...], Key, bool] | None:
    label, sep, key = rest.rpartition("__")
    if not sep or not label or not key:
        raise ConfigError(f"{var}: expected {variable(path)}__NAME__KEY")
    entries = entries if isinstance(entries, dict) else {}
    alike = [name for name in entries if _upper(name) == label]
    if len(alike) > 1:
        raise ConfigError(f"{var}: {' and '.join(alike)} in [{'.'.join(path)}] have the same "
                          "variable name; rename one")
    name = alike[0] if alike else label.lower()
    entry = entries.get(name)
    return _find(entry_of(entry if isinstance(entry, dict) else {}), key, entry, (*path, name),
                 var)


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any, var: str) -> None:
    table = data
    for i, part in enumerate(path[:-1]):
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{var}: {'.'.join(path[:i + 1])} is not a table in the config "
                              "file")
    table[path[-1]] = value
