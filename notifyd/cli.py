"""Thin click commands over the same store the daemon uses; each works beside a running daemon."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from notifyd import resolution
from notifyd.auth import hash_key, new_key
from notifyd.clock import SystemClock
from notifyd.config import NAME_RE, Config, load_config, render_example
from notifyd.errors import ConfigError
from notifyd.models import iso
from notifyd.store import Notification, Store, open_store
from notifyd.views import status_view, timeline

T = TypeVar("T")


def _config(ctx: click.Context) -> Config:
    obj: dict[str, Any] = ctx.ensure_object(dict)
    if "config" not in obj:
        try:
            cfg = load_config(obj.get("config_path"))
        except ConfigError as e:
            raise click.ClickException(f"config error: {e}") from None
        if obj.get("db"):
            cfg = dataclasses.replace(cfg, store=dataclasses.replace(cfg.store, path=obj["db"]))
        obj["config"] = cfg
    return obj["config"]  # type: ignore[no-any-return]


def _with_store(ctx: click.Context, fn: Callable[[Store], Awaitable[T]]) -> T:
    cfg = _config(ctx)

    async def run() -> T:
        store = await open_store(cfg.store.path, cfg.store.synchronous,
                                 cfg.store.busy_timeout_ms)
        try:
            return await fn(store)
        finally:
            await store.close()

    return asyncio.run(run())


@click.group()
@click.option("--config", "-c", "config_path", envvar="NOTIFYD_CONFIG",
              type=click.Path(dir_okay=False), help="TOML config file (default: built-in).")
@click.option("--db", envvar="NOTIFYD_DB", help="SQLite file; overrides store.path.")
@click.version_option(package_name="notifyd")
@click.pass_context
def main(ctx: click.Context, config_path: str | None, db: str | None) -> None:
    """notifyd: notifications that escalate across channels and know when to stop.

    Example: notifyd serve
    """
    ctx.ensure_object(dict).update(config_path=config_path, db=db)


@main.command()
@click.option("--host", help="Override server.host.")
@click.option("--port", type=int, help="Override server.port.")
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None) -> None:
    """Run the daemon: HTTP API, scanner and senders, until SIGTERM.

    Example: notifyd serve --port 7726
    """
    from notifyd.daemon import AlreadyRunning
    from notifyd.daemon import serve as run_serve

    cfg = _config(ctx)
    server = dataclasses.replace(cfg.server, host=host or cfg.server.host,
                                 port=cfg.server.port if port is None else port)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        run_serve(dataclasses.replace(cfg, server=server))
    except AlreadyRunning as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("path", default="notifyd.toml", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(path: str, force: bool) -> None:
    """Write a commented starter config with every key and its default.

    Example: notifyd init /etc/notifyd/notifyd.toml
    """
    target = Path(path)
    if target.exists() and not force:
        raise click.ClickException(f"{path} exists; pass --force to overwrite it")
    target.write_text(render_example())
    click.echo(f"wrote {path}; start with: notifyd --config {path} serve")


@main.group()
def keys() -> None:
    """Create, list and revoke API keys.

    Example: notifyd keys create --name billing --kinds payment_failed
    """


@keys.command("create")
@click.option("--name", required=True, help="A name for the key, shown in inspect.")
@click.option("--tenant", default="default", show_default=True,
              help="The tenant whose recipients this key may post to.")
@click.option("--kinds", default="", help="Comma-separated kinds this key may post (default all).")
@click.pass_context
def keys_create(ctx: click.Context, name: str, tenant: str, kinds: str) -> None:
    """Create an API key and print it once; only its hash is stored.

    Example: notifyd keys create --name billing --tenant acme --kinds invoice_due,payment_failed
    """
    cfg = _config(ctx)
    allowed = tuple(k.strip() for k in kinds.split(",") if k.strip())
    unknown = [k for k in allowed if k not in cfg.kinds]
    if unknown:
        raise click.ClickException(f"--kinds: unknown kind {unknown[0]!r} "
                                   f"(configured: {', '.join(sorted(cfg.kinds))})")
    if not NAME_RE.match(name) or not NAME_RE.match(tenant):
        raise click.ClickException("--name and --tenant: lower-case letters, digits, _ . -")
    key = new_key()
    now = SystemClock().now_ms()
    try:
        _with_store(ctx, lambda s: s.create_key(hash_key(key), name, tenant, allowed, now))
    except Exception as e:  # the unique name is the likely one
        if "UNIQUE" in str(e):
            raise click.ClickException(f"a key named {name!r} exists") from None
        raise
    click.echo(key)
    click.echo(f"key {name!r} for tenant {tenant!r}: shown once, store it now", err=True)


@keys.command("list")
@click.pass_context
def keys_list(ctx: click.Context) -> None:
    """List keys by name (never the keys themselves).

    Example: notifyd keys list
    """
    for k in _with_store(ctx, lambda s: s.list_keys()):
        state = "revoked" if k.revoked_at else "active"
        click.echo(f"{k.name}\ttenant={k.tenant}\tkinds={','.join(k.kinds) or '*'}\t{state}")


@keys.command("revoke")
@click.argument("name")
@click.pass_context
def keys_revoke(ctx: click.Context, name: str) -> None:
    """Revoke a key; a running daemon stops honouring it within seconds.

    Example: notifyd keys revoke billing
    """
    if not _with_store(ctx, lambda s: s.revoke_key(name, SystemClock().now_ms())):
        raise click.ClickException(f"no active key named {name!r}")
    click.echo(f"revoked {name}")


async def _find(store: Store, ref: str, tenant: str) -> Notification:
    parsed = resolution.parse_ref(ref)
    # An id is found in any tenant (this is the operator); user_id:dedup_key within --tenant.
    n = await resolution.find(store, parsed, None if parsed.notification_id else tenant)
    if n is None:
        raise click.ClickException(f"no notification {ref!r} (tenant {tenant!r})")
    return n


_REF_HELP = "A notification id (n_...) or user_id:dedup_key."


@main.command()
@click.argument("ref")
@click.option("--tenant", default="default", show_default=True, help="For user_id:dedup_key.")
@click.option("--json", "as_json", is_flag=True, help="Print the status document instead.")
@click.pass_context
def inspect(ctx: click.Context, ref: str, tenant: str, as_json: bool) -> None:
    """Print a notification's whole ladder as a timeline: what was decided, when and why.

    REF is a notification id (n_...) or user_id:dedup_key.

    Example: notifyd inspect u_42:invoice-1009
    """
    n = _with_store(ctx, lambda s: _find(s, ref, tenant))
    if as_json:
        click.echo(json.dumps(status_view(n), indent=2))
    else:
        click.echo("\n".join(timeline(n)))


@main.command()
@click.argument("ref")
@click.option("--tenant", default="default", show_default=True, help="For user_id:dedup_key.")
@click.option("--resolution", "what", default=resolution.DEFAULT_RESOLUTION, show_default=True,
              help="What happened, e.g. confirmed.")
@click.pass_context
def resolve(ctx: click.Context, ref: str, tenant: str, what: str) -> None:
    """Resolve a notification so its ladder stops; the first resolution wins.

    REF is a notification id (n_...) or user_id:dedup_key.

    Example: notifyd resolve n_01j8... --resolution confirmed
    """

    async def run(store: Store) -> str:
        n = await _find(store, ref, tenant)
        r = await resolution.resolve(store, n, what, "cli", SystemClock().now_ms())
        if not r.changed:
            return f"{r.notification_id} was already resolved: {r.resolution}"
        return f"{r.notification_id} resolved: {r.resolution}; cancelled {r.cancelled_steps} steps"

    click.echo(_with_store(ctx, run))


@main.command()
@click.argument("ref")
@click.pass_context
def replay(ctx: click.Context, ref: str) -> None:
    """Put dead or unknown steps back to pending, under their original key and frozen payload.

    REF is a step (n_...:STEP_NO) or a notification id (all its dead and unknown steps).

    Example: notifyd replay n_01m8n828e4dmgf5p4k:1
    """
    nid, _, no = ref.partition(":")
    if no and not no.isdigit():
        raise click.ClickException(f"{ref!r}: expected n_...:STEP_NO")
    step = int(no) if no else None
    count = _with_store(ctx, lambda s: s.replay(nid, step, SystemClock().now_ms()))
    if not count:
        raise click.ClickException(f"no dead or unknown step at {ref!r}")
    click.echo(f"replayed {count} step(s); a running daemon sends them within its poll interval")


@main.command("dead-letters")
@click.option("--limit", default=50, show_default=True, help="Most rows shown, newest first.")
@click.pass_context
def dead_letters(ctx: click.Context, limit: int) -> None:
    """List dead steps with the failure that killed them.

    Example: notifyd dead-letters --limit 20
    """
    rows = _with_store(ctx, lambda s: s.dead_letters(limit))
    for r in rows:
        click.echo(f"{iso(r.updated_at)}  {r.notification_id}:{r.step_no}  "
                   f"{r.channel}  attempts={r.attempts}  {r.reason}")
    if not rows:
        click.echo("no dead letters")
