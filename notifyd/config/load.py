"""TOML and the environment into the config's tables: the file read, the keys that moved put
where they live now, the environment laid over it (core/environ), each table built from its
declaration with its value's type checked, then every table checked (check.py). A ConfigError
names the key, never the value, and the variable that set it, if one did."""

from __future__ import annotations

import dataclasses
import functools
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.config.check import validate
from notifyd.config.policy import ChannelConfig
from notifyd.config.root import Config
from notifyd.core.environ import LIST, Table, convert, merged, overlay, table_of
from notifyd.core.errors import ConfigError
from notifyd.receipts import PROVIDERS

SQLITE_URL = "sqlite:///"
# Keys that moved, and where to: a config that still has one keeps working (both: an error).
MOVED = {("store", "path"): ("store", "url"),
         **{("store", key): ("store", "sqlite", key)
            for key in ("synchronous", "busy_timeout_ms", "check_at_start")},
         ("daemon", "ready_max_due_lag_sec"): ("daemon", "ready_max_loop_lag_sec")}
PROXY_VARIABLES = ("https_proxy", "http_proxy", "no_proxy")  # [egress] keys, as the variables


def load_config(path: str | Path | None, environ: Mapping[str, str] | None = None) -> Config:
    """The config at `path` (the built-in defaults when `path` is None) with the environment laid
    over it (`environ`, default the process's): each secret's KEY_file read, then every
    NOTIFYD_<SECTION>_<KEY> variable (core/environ.py), then HTTPS_PROXY, HTTP_PROXY and
    NO_PROXY for the [egress] keys still empty. A relative store path in a file is relative to
    that file's folder, so every command finds the same database. A ConfigError about a key a
    variable set names the variable too."""
    environ = os.environ if environ is None else environ
    folder = None if path is None else Path(path).resolve().parent
    data = {} if path is None else moved(_read(Path(path)))
    origins = overlay(data, env_table(), environ, folder)
    origins.update(_proxies(data, environ))
    try:
        cfg = validate(_build(Config, data, ""))
    except ConfigError as e:
        raise _naming(e, origins) from None
    if folder is None:
        return cfg
    return dataclasses.replace(
        cfg, store=dataclasses.replace(cfg.store, url=beside(cfg.store.url, folder)),
        templates=dataclasses.replace(cfg.templates,
                                      folder=str(folder / cfg.templates.folder)))


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder, not a config file") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


@functools.cache
def env_table() -> Table:
    """The config's keys as the environment may set them: a channel's are its type's too."""
    shared = table_of(ChannelConfig)

    def channel(entry: Mapping[str, Any]) -> Table:
        ctype = CHANNEL_TYPES.get(str(entry.get("type", "log")))
        return merged(shared, table_of(ctype.settings)) if ctype else shared

    webhooks = Table(tables={name: table_of(p.settings) for name, p in PROVIDERS.items()})
    return table_of(Config, channels=channel, webhooks=webhooks)


def _proxies(data: dict[str, Any], environ: Mapping[str, str]) -> dict[str, str]:
    """Each [egress] key the config leaves empty, from the variable of its name (lower case
    first, as curl reads them); the key each set, to the variable."""
    egress = data.setdefault("egress", {})
    origins: dict[str, str] = {}
    if not isinstance(egress, dict):
        return origins
    for key in PROXY_VARIABLES:
        var = next((v for v in (key, key.upper()) if environ.get(v, "").strip()), None)
        if var is not None and not egress.get(key):
            egress[key] = convert(environ[var], LIST, var) if key == "no_proxy" \
                else environ[var].strip()
            origins[f"egress.{key}"] = var
    return origins


def _naming(error: ConfigError, origins: Mapping[str, str]) -> ConfigError:
    """`error`, saying which variable set the key it names, if one did."""
    message = str(error)
    for key, var in sorted(origins.items(), key=lambda item: -len(item[0])):
        if message.startswith(key) and message[len(key):len(key) + 1] in (":", ".", "["):
            return ConfigError(f"{message} (set by {var})")
    return error


def moved(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each key of MOVED where it lives now: store.path is store.url, the SQLite
    keys that sat in [store] sit in [store.sqlite], and daemon.ready_max_due_lag_sec is
    daemon.ready_max_loop_lag_sec."""
    for old, new in MOVED.items():
        table = data.get(old[0])
        if not isinstance(table, dict) or old[1] not in table:
            continue
        parent = data
        for part in new[:-1]:
            parent = parent.setdefault(part, {})
            if not isinstance(parent, dict):
                raise ConfigError(f"{'.'.join(new[:-1])}: expected a table")
        if new[-1] in parent:
            raise ConfigError(f"{'.'.join(old)}: the old name of {'.'.join(new)}, which is set "
                              f"too; keep only {'.'.join(new)}")
        parent[new[-1]] = table.pop(old[1])
    return data


def beside(store: str, folder: Path) -> str:
    """A relative SQLite path (bare or sqlite:///rel) made absolute from `folder`."""
    prefix = SQLITE_URL if store.startswith(SQLITE_URL) else ""
    rest = store[len(prefix):]
    if "://" in store and not prefix or Path(rest).is_absolute():
        return store
    return prefix + str(folder / rest)


def _build(cls: type[Any], data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'}: expected a table")
    if cls is Config and "webhooks" in data:
        webhooks = _build_webhooks(data["webhooks"])
        return dataclasses.replace(_build(Config, {k: v for k, v in data.items()
                                                   if k != "webhooks"}, where), webhooks=webhooks)
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key (known: {', '.join(sorted(names))})")
    kwargs = {k: _coerce(hints[k], v, _join(where, k)) for k, v in data.items()}
    return cls(**kwargs)


def _build_channel(data: Any, where: str) -> ChannelConfig:
    """A [channels.NAME] table: the shared keys, and the rest checked against its type's keys."""
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a table")
    type_name = data.get("type", "log")
    if type_name not in CHANNEL_TYPES:
        raise ConfigError(f"{where}.type: must be one of {', '.join(CHANNEL_TYPES)}")
    ctype = CHANNEL_TYPES[type_name]
    shared = {f.name for f in dataclasses.fields(ChannelConfig) if f.name != "settings"}
    own = {f.name for f in dataclasses.fields(ctype.settings)}
    unknown = sorted(set(data) - shared - own)
    if unknown:
        raise ConfigError(f"{_join(where, unknown[0])}: unknown key for a {type_name} channel "
                          f"(known: {', '.join(sorted(shared | own))})")
    settings = _build(ctype.settings, {k: v for k, v in data.items() if k in own}, where)
    common: ChannelConfig = _build(ChannelConfig, {k: v for k, v in data.items() if k in shared},
                                   where)
    return dataclasses.replace(common, settings=settings)


def _build_webhooks(data: Any) -> dict[str, Any]:
    """The [webhooks.PROVIDER] tables, each checked against that provider's keys."""
    if not isinstance(data, dict):
        raise ConfigError("webhooks: expected a table")
    out = {}
    for name, table in data.items():
        if name not in PROVIDERS:
            raise ConfigError(f"webhooks.{name}: unknown provider (known: "
                              f"{', '.join(sorted(PROVIDERS))})")
        out[name] = _build(PROVIDERS[name].settings, table, f"webhooks.{name}")
    return out


def _coerce(tp: Any, value: Any, where: str) -> Any:  # noqa: C901 - one branch per TOML shape
    origin = typing.get_origin(tp)
    if tp is ChannelConfig:
        return _build_channel(value, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _build(tp, value, where)
    if origin is dict:
        inner = typing.get_args(tp)[1]
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table")
        return {k: _coerce(inner, v, f"{where}.{k}") for k, v in value.items()}
    if origin is tuple:
        inner = typing.get_args(tp)[0]
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected an array")
        return tuple(_coerce(inner, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (types.UnionType, typing.Union):
        if value is None:
            return None
        return _coerce(typing.get_args(tp)[0], value, where)
    if tp is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if tp is bool and isinstance(value, bool):
        return value
    if tp in (int, str) and isinstance(value, tp) and not isinstance(value, bool):
        return value
    # The value itself is not echoed: it may be a secret in the wrong place.
    raise ConfigError(f"{where}: expected {tp.__name__}, got {type(value).__name__}")


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key
