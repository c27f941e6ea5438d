"""API keys and user tokens: made, listed, revoked, rotated."""

from __future__ import annotations

import base64
from pathlib import Path

import click

from notifyd.cli.base import (
    CREATE,
    WRITE,
    config_of,
    database,
    global_options,
    known_tenant,
    main,
    with_store,
)
from notifyd.config import NAME_RE
from notifyd.core.clock import SystemClock
from notifyd.core.fields import MAX_SEC
from notifyd.core.models import ALL_SCOPES, SCOPES
from notifyd.core.records import SigningKey
from notifyd.core.text import iso
from notifyd.domain import signed
from notifyd.http.auth import hash_key, new_key
from notifyd.store import KeyStore, sqlite_path


@main.group()
def keys() -> None:
    """Create, list and revoke API keys.

    Example: notifyd keys create --name billing --kinds payment_failed
    """


@keys.command("create")
@global_options
@click.option("--name", required=True, help="A name for the key, shown in inspect.")
@click.option("--tenant", default="default", show_default=True,
              help="The tenant whose recipients this key may post to (notifyd tenants create).")
@click.option("--kinds", default="", help="Comma-separated kinds this key may post and whose inbox items it "
              "may see (default all).")
@click.option("--scopes", default=",".join(sorted(SCOPES)), show_default=True,
              help="What it may do: post, read, resolve, users (profiles and contacts), topics "
                   "(manage topics, send events to them); everyone (send events to every user "
                   "of the tenant) and admin (sign in to the operator console for its tenant) "
                   "only when named.")
@click.pass_context
def keys_create(ctx: click.Context, name: str, tenant: str, kinds: str, scopes: str) -> None:
    """Create an API key and print it once; only its hash is stored. Creates the database if
    there is none yet.

    Example: notifyd keys create --name billing --tenant acme --kinds invoice_due,payment_failed
    """
    cfg = config_of(ctx)
    allowed = tuple(k.strip() for k in kinds.split(",") if k.strip())
    unknown = [k for k in allowed if k not in cfg.kinds]
    if unknown:
        raise click.ClickException(f"--kinds: unknown kind {unknown[0]!r} "
                                   f"(configured: {', '.join(sorted(cfg.kinds))})")
    if not NAME_RE.match(name) or not NAME_RE.match(tenant):
        raise click.ClickException("--name and --tenant: lower-case letters, digits, _ . -")
    may = frozenset(s.strip() for s in scopes.split(",") if s.strip())
    if not may or not may <= ALL_SCOPES:
        raise click.ClickException(f"--scopes: choose from {', '.join(sorted(ALL_SCOPES))}")
    key = new_key()
    path = sqlite_path(cfg.store.url)
    new_database = path is not None and not Path(path).exists()

    async def create(s: KeyStore) -> bool:
        await known_tenant(s, tenant)
        if any(k.name == name for k in await s.list_keys()):
            return False
        await s.create_key(hash_key(key), name, tenant, allowed, may)
        return True

    if not with_store(ctx, create, CREATE):
        raise click.ClickException(f"a key named {name!r} exists")
    click.echo(key)
    click.echo(f"key {name!r} for tenant {tenant!r}: shown once, store it now", err=True)
    if new_database and ctx.find_root().obj.get("config_path") is None:
        click.echo(f"warning: no config file was given (--config or NOTIFYD_CONFIG) and there "
                   f"was no database at {database(cfg)}, so this made a new one: a daemon "
                   "started with a config or from another folder uses another database, and "
                   "will not know this key", err=True)


@keys.command("list")
@global_options
@click.pass_context
def keys_list(ctx: click.Context) -> None:
    """List keys by name (never the keys themselves), with when each was made and last
    used (to the minute, as a running daemon writes it).

    Example: notifyd keys list
    """
    for k in with_store(ctx, lambda s: s.list_keys()):
        state = "revoked" if k.revoked_at else "active"
        used = iso(k.last_used_at) if k.last_used_at is not None else "never"
        click.echo(f"{k.name}\ttenant={k.tenant}\tkinds={','.join(k.kinds) or '*'}\t"
                   f"scopes={','.join(k.scopes)}\t{state}\tcreated={iso(k.created_at)}\t"
                   f"last_used={used}")


@keys.command("revoke")
@global_options
@click.argument("name")
@click.pass_context
def keys_revoke(ctx: click.Context, name: str) -> None:
    """Revoke a key; a running daemon stops honouring it within seconds.

    Example: notifyd keys revoke billing
    """
    if not with_store(ctx, lambda s: s.revoke_key(name), WRITE):
        raise click.ClickException(f"no active key named {name!r}")
    click.echo(f"revoked {name}")



@main.group()
def tokens() -> None:
    """User tokens: what a person's page uses to read their own inbox and preferences.

    Example: notifyd tokens secret --tenant acme
    """


def _tenant_key(ctx: click.Context, tenant: str) -> bytes:
    async def key(s: KeyStore) -> bytes:
        await known_tenant(s, tenant)
        return await s.signing_key(signed.tenant_key_name(tenant))

    return with_store(ctx, key, WRITE)


def _b64(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode().rstrip("=")


@tokens.command("secret")
@global_options
@click.option("--tenant", default="default", show_default=True)
@click.pass_context
def tokens_secret(ctx: click.Context, tenant: str) -> None:
    """Print the tenant's user-token key (base64url), made on first use, so a producer's
    backend can sign user tokens itself (docs/people.md: "User tokens"). Keep it like an API key.

    Example: notifyd tokens secret --tenant acme
    """
    click.echo(_b64(_tenant_key(ctx, tenant)))


@tokens.command("rotate")
@global_options
@click.option("--tenant", default="default", show_default=True)
@click.option("--overlap", "overlap_sec", type=click.IntRange(0, MAX_SEC), default=None,
              help="Seconds the old key still verifies tokens it signed (default: "
                   "tokens.max_ttl_sec, so each can run its course); 0 ends them now.")
@click.pass_context
def tokens_rotate(ctx: click.Context, tenant: str, overlap_sec: int | None) -> None:
    """Give the tenant's user tokens a new key and print it (base64url), as `tokens secret`
    does: tokens notifyd makes from now on are signed with it, and backends that sign their
    own need it. Tokens signed with the old key work until the overlap ends, then stop; a
    running daemon takes the new key within seconds.

    Example: notifyd tokens rotate --tenant acme --overlap 3600
    """
    overlap = config_of(ctx).tokens.max_ttl_sec if overlap_sec is None else overlap_sec

    async def rotate(s: KeyStore) -> SigningKey:
        await known_tenant(s, tenant)
        return await s.rotate_signing_key(signed.tenant_key_name(tenant), overlap * 1000)

    key = with_store(ctx, rotate, WRITE)
    click.echo(_b64(key.secret))
    if key.previous is not None:
        click.echo(f"the old key verifies tokens until {iso(key.previous_until)}", err=True)


@tokens.command("create")
@global_options
@click.argument("user_id")
@click.option("--tenant", default="default", show_default=True)
@click.option("--ttl", "ttl_sec", type=click.IntRange(60, MAX_SEC), default=3600,
              show_default=True, help="Seconds the token is valid (at most tokens.max_ttl_sec).")
@click.pass_context
def tokens_create(ctx: click.Context, user_id: str, tenant: str, ttl_sec: int) -> None:
    """Print a user token for one user (to try the inbox API by hand).

    Example: notifyd tokens create ada --tenant acme --ttl 600
    """
    longest = config_of(ctx).tokens.max_ttl_sec
    if ttl_sec > longest:
        raise click.ClickException(f"--ttl: at most {longest} (tokens.max_ttl_sec)")
    now = SystemClock().now_ms() // 1000
    click.echo(signed.make_user_token(_tenant_key(ctx, tenant), tenant, user_id, now + ttl_sec,
                                      issued_at=now))
