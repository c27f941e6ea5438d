"""The suppression list: addresses notifyd never sends to."""

from __future__ import annotations

from typing import Protocol

import click

from notifyd.cli.base import WRITE, global_options, known_tenant, main, with_store
from notifyd.core.contacts import SUPPRESSION_TYPES
from notifyd.core.errors import DomainError
from notifyd.core.text import iso
from notifyd.domain import suppressions
from notifyd.store import KeyStore, Suppression, SuppressionStore


class ListStore(KeyStore, SuppressionStore, Protocol):
    """What these commands use: the tenant checked, then the suppression list."""


@main.group("suppressions")
def suppressions_group() -> None:
    """The suppression list: addresses notifyd will not send to, and why.

    Example: notifyd suppressions list --tenant acme
    """


TENANT_OPTION = click.option(
    "--tenant", default="default", show_default=True,
    help="Whose list; '*' is the account-wide list (an SMS STOP to a shared number).")
TYPE_ARGUMENT = click.argument("channel_type", type=click.Choice(SUPPRESSION_TYPES))


def _address(channel_type: str, address: str) -> str:
    try:
        return suppressions.check_address(channel_type, address)
    except DomainError as e:
        raise click.ClickException(e.message) from None


@suppressions_group.command("list")
@global_options
@TENANT_OPTION
@click.option("--address", default=None, help="Only this address (or device id).")
@click.option("--limit", default=1000, show_default=True, help="Most rows shown, newest first.")
@click.pass_context
def suppressions_list(ctx: click.Context, tenant: str, address: str | None, limit: int) -> None:
    """List suppressed addresses, newest first, with the evidence that put each there.

    Example: notifyd suppressions list --address ada@example.com
    """
    async def read(s: ListStore) -> list[Suppression]:
        await known_tenant(s, tenant, everyone=True)
        return await s.suppressions(tenant, address, limit)

    rows = with_store(ctx, read)
    for r in rows:
        scope = "*" if r.tenant == "*" else r.tenant
        click.echo(f"{iso(r.created_at)}  {r.channel_type:<8} {r.address}  {r.reason}  "
                   f"source={r.source}{'  evidence=' + r.evidence if r.evidence else ''}  "
                   f"tenant={scope}")
    if not rows:
        click.echo("no suppressions")


@suppressions_group.command("add")
@global_options
@TENANT_OPTION
@TYPE_ARGUMENT
@click.argument("address")
@click.option("--reason", default="added by an operator", show_default=True)
@click.pass_context
def suppressions_add(ctx: click.Context, tenant: str, channel_type: str, address: str,
                     reason: str) -> None:
    """Stop sending to an address (push: a device id, which dies).

    Example: notifyd suppressions add email ada@example.com --reason "asked by phone"
    """
    address = _address(channel_type, address)

    async def add(s: ListStore) -> bool:
        await known_tenant(s, tenant, everyone=True)
        return await s.suppress(tenant, channel_type, address, reason, "cli")

    added = with_store(ctx, add, WRITE)
    click.echo(f"{'suppressed' if added else 'already suppressed (or no such device)'}: "
               f"{channel_type} {address} for tenant {tenant}")


@suppressions_group.command("remove")
@global_options
@TENANT_OPTION
@TYPE_ARGUMENT
@click.argument("address")
@click.pass_context
def suppressions_remove(ctx: click.Context, tenant: str, channel_type: str, address: str) -> None:
    """Send to an address again (push: the device lives again). Steps already suppressed stay so.

    Example: notifyd suppressions remove sms +14155550123 --tenant '*'
    """
    address = _address(channel_type, address)

    async def remove(s: ListStore) -> bool:
        await known_tenant(s, tenant, everyone=True)
        return await s.unsuppress(tenant, channel_type, address)

    if not with_store(ctx, remove, WRITE):
        raise click.ClickException(f"{channel_type} {address} is not on tenant {tenant}'s list")
    click.echo(f"removed: {channel_type} {address} for tenant {tenant}")
