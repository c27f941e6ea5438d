"""Tenants: made on purpose, listed with what each has. The store is where they exist; the
config's [tenants.NAME] tables hold their settings (cors_origins)."""

from __future__ import annotations

import click

from notifyd.cli.base import CREATE, config_of, global_options, main, with_store
from notifyd.config import NAME_RE
from notifyd.core.text import iso
from notifyd.domain import signed
from notifyd.store import KeyStore


@main.group("tenants")
def tenants_group() -> None:
    """Tenants: each has its own keys, people, notifications and user-token key.

    Example: notifyd tenants create acme
    """


@tenants_group.command("create")
@global_options
@click.argument("name")
@click.pass_context
def tenants_create(ctx: click.Context, name: str) -> None:
    """Make a tenant; commands that name one (keys create --tenant, tokens, suppressions,
    inspect, users delete) refuse a tenant not made so. The default tenant is always there.
    Creates the database if there is none yet.

    Example: notifyd tenants create acme
    """
    if not NAME_RE.match(name):
        raise click.ClickException("NAME: lower-case letters, digits, _ . -")
    if not with_store(ctx, lambda s: s.create_tenant(name), CREATE):
        raise click.ClickException(f"a tenant named {name!r} exists")
    click.echo(f"tenant {name!r} created; next: notifyd keys create --name NAME --tenant {name}")


@tenants_group.command("list")
@global_options
@click.pass_context
def tenants_list(ctx: click.Context) -> None:
    """List tenants with their active keys, whether their user-token key is made, and their
    settings; a [tenants.NAME] table in the config naming no tenant is shown too.

    Example: notifyd tenants list
    """
    settings = config_of(ctx).tenants

    async def read(s: KeyStore) -> list[str]:
        keys = [k for k in await s.list_keys() if k.revoked_at is None]
        found, lines = await s.tenants(), []
        for t in found:
            made = await s.find_signing_key(signed.tenant_key_name(t.name)) is not None
            origins = settings[t.name].cors_origins if t.name in settings else ()
            lines.append(f"{t.name}\tcreated={iso(t.created_at)}\t"
                         f"keys={sum(k.tenant == t.name for k in keys)}\t"
                         f"user_tokens={'yes' if made else 'no'}\t"
                         f"cors_origins={','.join(origins) or '-'}")
        names = {t.name for t in found}
        lines += [f"{name}\tnot created: the config has [tenants.{name}] (notifyd tenants "
                  f"create {name})" for name in sorted(settings) if name not in names]
        return lines

    for line in with_store(ctx, read):
        click.echo(line)
