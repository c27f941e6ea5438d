"""Events posted for many people (POST /v1/events): `notifyd events show` prints an event's
document and follows its fan-out; `notifyd inspect ID` (or `--event ID`) lists its recipients'
ladders."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any, cast

import click
import msgspec

from notifyd.cli.base import global_options, main, with_store
from notifyd.core.clock import SystemClock
from notifyd.core.events import EventRecord
from notifyd.domain import events
from notifyd.store import EventStore

EVENT_PAGE = 500  # an event's notifications read at a time by inspect --event
FOLLOW_SEC = 0.5  # events show --follow reads the event again this often


def inspect_event(ctx: click.Context, tenant: str, event_id: str) -> None:
    """`inspect --event ID`: the event of that id in `tenant`, as `show_event` prints it."""

    async def run(store: EventStore) -> None:
        e = await store.get_event(tenant, event_id)
        if e is None:
            raise click.ClickException(f"no event {event_id!r} in tenant {tenant!r} (--tenant)")
        await show_event(store, e)

    with_store(ctx, run)


async def show_event(store: EventStore, e: EventRecord) -> None:
    """The event's summary, then its notifications a page at a time, by recipient."""
    now = SystemClock().now_ms()
    click.echo("\n".join(events.summary(e, await store.event_counts(e.tenant, e.event_id), now)))
    after = ("", "")
    while page := await store.event_notifications(e.tenant, e.event_id, after, EVENT_PAGE):
        click.echo("\n".join(events.ladder_line(n, now) for n in page))
        after = (page[-1].user_id, page[-1].id)


@main.group("events")
def events_group() -> None:
    """Events posted for many people (POST /v1/events), and their fan-out.

    Example: notifyd events show launch-42 --tenant acme --follow
    """


@events_group.command("show")
@global_options
@click.argument("event_id")
@click.option("--tenant", default="default", show_default=True)
@click.option("--follow", is_flag=True, help="While it routes, redraw its progress until every "
              "recipient is routed, then print the document.")
@click.pass_context
def events_show(ctx: click.Context, event_id: str, tenant: str, follow: bool) -> None:
    """Print an event's document, as GET /v1/events/ID answers it: its audience, how far its
    fan-out has got and how its notifications stand.

    Example: notifyd events show launch-42 --tenant acme --follow
    """

    async def run(store: EventStore) -> dict[str, Any]:
        e = await store.get_event(tenant, event_id)
        if e is None:
            raise click.ClickException(f"no event {event_id!r} in tenant {tenant!r} (--tenant)")
        if follow and e.routed_at is None:
            with click.progressbar(length=max(e.size, 1), label=f"routing {event_id}",
                                   file=sys.stderr, show_pos=True) as bar:
                shown = 0
                while e is not None and e.routed_at is None:
                    bar.update(e.routed - shown)
                    shown = e.routed
                    await asyncio.sleep(FOLLOW_SEC)
                    e = await store.get_event(tenant, event_id)
                if e is not None:
                    bar.update(e.size - shown)
            if e is None:
                raise click.ClickException(f"event {event_id!r} is gone (pruned)")
        return cast(dict[str, Any], msgspec.to_builtins(events.event_view(
            e, await store.event_counts(tenant, event_id), SystemClock().now_ms())))

    click.echo(json.dumps(with_store(ctx, run), indent=2))
