"""Thin click commands over the same store the daemon uses; each works beside a running daemon.

Commands that only read refuse a database that does not exist (naming the path) instead of leaving
a fresh one behind; commands that write say which database they wrote to. Ordinary mistakes are
one line naming the problem and the fix, never a traceback.

This module holds what every command shares: the global options, the config, the store opened
for one command, and the `notifyd` group the others join."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from notifyd.config import Config, load_config
from notifyd.core.clock import SystemClock
from notifyd.core.errors import ConfigError
from notifyd.core.text import redact_url
from notifyd.store import (
    KeyStore,
    Store,
    StoreUnavailable,
    open_store,
    sqlite_path,
)

T = TypeVar("T")
READ, WRITE, CREATE = "read", "write", "create"  # what a command does to the database


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """--config and --db work before the subcommand or after it, as people type them."""
    if value is not None:
        ctx.find_root().ensure_object(dict)[param.name or ""] = value


def global_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--config", "-c", "config_path", envvar="NOTIFYD_CONFIG",
                     type=click.Path(dir_okay=False), expose_value=False, callback=_remember,
                     help="TOML config file (default: built-in).")(f)
    return click.option("--db", envvar="NOTIFYD_DB", expose_value=False, callback=_remember,
                        help="The database (a path, sqlite:///path or postgresql://user@host/db); "
                        "overrides store.url.")(f)


def config_of(ctx: click.Context) -> Config:
    obj: dict[str, Any] = ctx.find_root().ensure_object(dict)
    if "config" not in obj:
        try:
            obj["config"] = load_obj(obj)
        except ConfigError as e:
            raise click.ClickException(f"config error: {e}") from None
    return obj["config"]  # type: ignore[no-any-return]


def load_obj(obj: dict[str, Any]) -> Config:
    """The config file (or the built-in one) with --db; ConfigError names what is wrong."""
    cfg = load_config(obj.get("config_path"))
    if obj.get("db"):
        cfg = dataclasses.replace(cfg, store=dataclasses.replace(cfg.store, url=obj["db"]))
    return cfg


def database(cfg: Config) -> str:
    """The database as people should read it: an absolute path for SQLite, a URL without its
    password."""
    path = sqlite_path(cfg.store.url)
    return str(Path(path).resolve()) if path is not None else redact_url(cfg.store.url)


def daemon_url(ctx: click.Context, url: str | None) -> str:
    """Where the running daemon answers: --url, else the config's server.host and port (a
    wildcard host is reached on loopback)."""
    if url:
        return url.rstrip("/")
    srv = config_of(ctx).server
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(srv.host, srv.host)
    return f"http://{f'[{host}]' if ':' in host else host}:{srv.port}"


def url_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--url", help="The daemon's address (default: "
                        "http://server.host:server.port from the config).")(f)


def key_option(f: Callable[..., Any]) -> Callable[..., Any]:
    return click.option("--key", envvar="NOTIFYD_KEY", help="The API key to call with (or "
                        "NOTIFYD_KEY); notifyd keys create makes one.")(f)


def need_key(key: str | None) -> str:
    if not key:
        raise click.ClickException("an API key is needed: --key KEY or NOTIFYD_KEY (notifyd "
                                   "keys create --name NAME makes one)")
    return key


def with_store(ctx: click.Context, fn: Callable[[Store], Awaitable[T]], mode: str = READ) -> T:
    cfg = config_of(ctx)

    async def run() -> T:
        store = await open_store(cfg.store.url, SystemClock(), sqlite=cfg.store.sqlite,
                                 postgres=cfg.store.postgres, create=mode == CREATE)
        try:
            return await fn(store)
        finally:
            await store.close()

    try:
        result = asyncio.run(run())
    except StoreUnavailable as e:
        raise click.ClickException(str(e)) from None
    if mode != READ:
        click.echo(f"(database {database(cfg)})", err=True)
    return result


async def known_tenant(store: KeyStore, name: str, everyone: bool = False) -> None:
    """Refuse a tenant the database does not have (a typo must not make one): tenants are made
    with `notifyd tenants create`. With `everyone`, '*' (every tenant) is taken too."""
    if (everyone and name == "*") or await store.find_tenant(name) is not None:
        return
    names = ", ".join(t.name for t in await store.tenants()) or "none"
    raise click.ClickException(f"no tenant {name!r} (tenants: {names}); if it is a new one, "
                               f"make it first: notifyd tenants create {name}")


@click.group(invoke_without_command=True)
@global_options
@click.version_option(package_name="notifyd-server")
@click.pass_context
def main(ctx: click.Context) -> None:
    """notifyd: notifications that escalate across channels and know when to stop.

    Example: notifyd serve
    """
    ctx.ensure_object(dict)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
