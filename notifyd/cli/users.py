"""People: erasing one, as DELETE /v1/users/{user_id} does."""

from __future__ import annotations

from typing import Protocol

import click

from notifyd.cli.base import WRITE, global_options, known_tenant, main, with_store
from notifyd.core.records import Erased
from notifyd.core.text import iso, plural
from notifyd.store import KeyStore, RecipientStore


class EraseStore(KeyStore, RecipientStore, Protocol):
    """What `users delete` uses: the tenant checked, then the person erased."""


@main.group()
def users() -> None:
    """The people notifyd knows: erase one.

    Example: notifyd users delete ada --tenant acme
    """


@users.command("delete")
@global_options
@click.argument("user_id")
@click.option("--tenant", default="default", show_default=True)
@click.pass_context
def users_delete(ctx: click.Context, user_id: str, tenant: str) -> None:
    """Erase a person: their profile, contacts, preferences, devices and inbox go; their open
    notifications are resolved "erased" (nothing more goes out); their notifications' params,
    frozen messages and receipts' addresses are scrubbed; suppressions of their addresses stay,
    kept as one-way hashes; user tokens made before now are refused. Prints what it did.

    Example: notifyd users delete ada --tenant acme
    """

    async def erase(s: EraseStore) -> Erased:
        await known_tenant(s, tenant)
        return await s.erase_user(tenant, user_id, "cli")

    click.echo("\n".join(erased_said(user_id, tenant, with_store(ctx, erase, WRITE))))


def erased_said(user_id: str, tenant: str, e: Erased) -> list[str]:
    """What `notifyd users delete` did, a line per part."""
    removed = [what for what, there in (("profile and contacts", e.profile),
                                        ("preferences", e.preferences)) if there]
    removed += [plural(e.devices, "device"), plural(e.inbox_items, "inbox item"),
                plural(e.memberships, "topic membership")]
    hashes = "a one-way hash" if e.hashed == 1 else "one-way hashes"
    return [f"erased {user_id} of tenant {tenant} at {iso(e.erased_at)}",
            f"  removed: {', '.join(removed)}",
            f"  cancelled: {plural(e.cancelled, 'open notification')} "
            f"({plural(e.cancelled_steps, 'step')} that had not gone)",
            f"  scrubbed: the params of {plural(e.params, 'notification')}, "
            f"{plural(e.payloads, 'frozen message')}, the addresses of "
            f"{plural(e.receipts, 'receipt')}, their email and phone in "
            f"{plural(e.events, 'event')}",
            f"  suppressions: {e.hashed} kept as {hashes}, {e.kept} left as "
            f"{'it was' if e.kept == 1 else 'they were'} (another person has the address)",
            "  user tokens made before now are refused"]
