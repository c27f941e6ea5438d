"""One notification or many: inspect, resolve, replay, the dead letters."""

from __future__ import annotations

import json
import re
import sys
from datetime import UTC, datetime
from typing import Protocol

import click
import msgspec

from notifyd.cli.base import (
    READ,
    WRITE,
    config_of,
    global_options,
    known_tenant,
    main,
    with_store,
)
from notifyd.cli.events import inspect_event, show_event
from notifyd.core.clock import SystemClock
from notifyd.core.events import EventRecord
from notifyd.core.text import iso, plural, them
from notifyd.domain.views import status_view, timeline
from notifyd.engine import replay as replays
from notifyd.engine import resolution
from notifyd.engine.digests import carriers
from notifyd.shapes.events import EVENT_ID_PATTERN
from notifyd.store import (
    DeadMatch,
    EventStore,
    KeyStore,
    LookupStore,
    Notification,
    ReplayStore,
)


class FindStore(KeyStore, LookupStore, Protocol):
    """A notification found by REF: the tenant checked, then the lookup."""


class InspectStore(FindStore, EventStore, Protocol):
    """`inspect`: a notification, or else the event of that id."""


class ResolveByRef(KeyStore, resolution.ResolverStore, Protocol):
    """`resolve`: the tenant checked, then the notification resolved."""


class ReplayByRef(FindStore, ReplayStore, replays.CheckStore, Protocol):
    """`replay REF`: the steps put back, then what the claim will suppress."""


def _ref(ref: str, tenant: str) -> tuple[resolution.Ref, str | None]:
    """REF parsed, and the tenant to look in: an id is found in any tenant (this is the
    operator), user_id:dedup_key within --tenant."""
    try:
        parsed = resolution.parse_ref(ref)
    except resolution.BadRef as e:
        raise click.ClickException(str(e)) from None
    return parsed, None if parsed.notification_id else tenant


def _no_such(ref: str, within: str | None) -> click.ClickException:
    where = f" in tenant {within!r} (--tenant)" if within is not None else ""
    return click.ClickException(f"no notification {ref!r}{where}; REF is {resolution.FORMS}")


async def _find(store: FindStore, ref: str, tenant: str) -> Notification:
    parsed, within = _ref(ref, tenant)
    if within is not None:
        await known_tenant(store, within)
    n = await resolution.find(store, parsed, within)
    if n is None:
        raise _no_such(ref, within)
    return n


INSPECTED = ("a notification id (n_ and 18 letters or digits), user_id:dedup_key, or an "
             "event's id")
EVENT_JSON = "--json with an event: notifyd events show ID prints the event's document"


async def _inspected(store: InspectStore, ref: str, tenant: str) -> Notification | EventRecord:
    """What REF names: a notification (its id in any tenant, user_id:dedup_key in `tenant`),
    else the event of that id in `tenant`; nothing, an error that says what was looked for."""
    try:
        parsed: resolution.Ref | None = resolution.parse_ref(ref)
    except resolution.BadRef:
        parsed = None
    if parsed is not None:
        n = await resolution.find(store, parsed, None if parsed.notification_id else tenant)
        if n is not None:
            return n
    event_id = re.match(EVENT_ID_PATTERN, ref) is not None
    e = await store.get_event(tenant, ref) if event_id else None
    if e is not None:
        return e
    if parsed is None and not event_id:
        raise click.ClickException(f"{ref!r} is not {INSPECTED}")
    by_id = parsed is not None and parsed.notification_id is not None
    if not by_id:  # an id is looked for in every tenant; else a mistyped --tenant is likelier
        await known_tenant(store, tenant)
    where = f"in tenant {tenant!r} (--tenant)"
    nothing = (f"no notification {ref!r}, and no event of that id {where}" if by_id
               else f"no notification or event {ref!r} {where}")
    raise click.ClickException(f"{nothing}; REF is {INSPECTED}")


@main.command()
@global_options
@click.argument("ref", required=False)
@click.option("--tenant", default="default", show_default=True,
              help="For user_id:dedup_key, and an event's id.")
@click.option("--json", "as_json", is_flag=True, help="Print the status document instead.")
@click.option("--event", "event_id", metavar="ID",
              help="Instead of REF: an event (POST /v1/events), its recipients and each ladder.")
@click.pass_context
def inspect(ctx: click.Context, ref: str | None, tenant: str, as_json: bool,
            event_id: str | None) -> None:
    """Print a notification's whole ladder as a timeline: what was decided, when and why.

    REF is a notification id (n_...) or user_id:dedup_key (split on the last colon); when it
    names no notification, an event's id in --tenant: the event and a line per notification it
    made, with the recipient, the kind, its state and each step (notifyd inspect n_... then
    shows one whole). --event ID asks for the event only.

    Example: notifyd inspect u_42:invoice-1009
    """
    if (ref is None) == (event_id is None):
        raise click.UsageError("give REF (a notification or an event) or --event ID, one of them")
    if event_id is not None:
        if as_json:
            raise click.UsageError(EVENT_JSON)
        inspect_event(ctx, tenant, event_id)
        return
    assert ref is not None

    async def run(store: InspectStore) -> None:
        found = await _inspected(store, ref, tenant)
        if isinstance(found, EventRecord):
            if as_json:
                raise click.UsageError(EVENT_JSON)
            await show_event(store, found)
            return
        digests, now = await carriers(store, found), SystemClock().now_ms()
        click.echo(json.dumps(msgspec.to_builtins(status_view(found, now, digests)),
                              indent=2) if as_json
                   else "\n".join(timeline(found, now, digests)))

    with_store(ctx, run)


@main.command()
@global_options
@click.argument("ref")
@click.option("--tenant", default="default", show_default=True, help="For user_id:dedup_key.")
@click.option("--resolution", "what", default=resolution.DEFAULT_RESOLUTION, show_default=True,
              help="What happened, e.g. confirmed.")
@click.pass_context
def resolve(ctx: click.Context, ref: str, tenant: str, what: str) -> None:
    """Resolve a notification so its ladder stops; the first resolution wins.

    REF is a notification id (n_...) or user_id:dedup_key (split on the last colon).

    Example: notifyd resolve n_01j8... --resolution confirmed
    """

    async def run(store: ResolveByRef) -> str:
        parsed, within = _ref(ref, tenant)
        if within is not None:
            await known_tenant(store, within)
        r = await resolution.resolve(store, parsed, what, "cli", within,
                                     read_kinds=config_of(ctx).catalog.read_on_resolve)
        if r is None:
            raise _no_such(ref, within)
        if not r.changed:
            return f"{r.notification_id} was already resolved: {r.resolution}"
        return (f"{r.notification_id} resolved: {r.resolution}; cancelled "
                f"{plural(r.cancelled_steps, 'step')}")

    click.echo(with_store(ctx, run, WRITE))


STEP_REF = re.compile(rf"({resolution.ID_RE.pattern}):(\d+)")
DURATION = re.compile(r"([0-9]+)([smhdw])")
SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    """--since T as epoch ms: an ISO 8601 time, or a duration back from now."""
    if value is None:
        return None
    text = value.strip()
    if m := DURATION.fullmatch(text):
        return SystemClock().now_ms() - int(m.group(1)) * SECONDS[m.group(2)] * 1000
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither an ISO 8601 time (2026-05-01T09:30:00+02:00, 2026-05-01) nor "
            "a duration back from now (90m, 2h, 3d)") from None
    if at.tzinfo is None:  # no offset: UTC, as every time notifyd prints
        at = at.replace(tzinfo=UTC)
    return int(at.timestamp() * 1000)


@main.command()
@global_options
@click.argument("ref", required=False)
@click.option("--tenant", default="default", show_default=True, help="For user_id:dedup_key.")
@click.option("--dead", "every_dead", is_flag=True,
              help="Instead of REF: every dead step, or those the options below pick.")
@click.option("--channel", help="With --dead: only steps on this channel.")
@click.option("--kind", help="With --dead: only steps of notifications of this kind.")
@click.option("--since", metavar="T", callback=_since,
              help="With --dead: only steps that ended dead at or after T, an ISO 8601 time "
                   "(no offset: UTC; a date alone: its midnight UTC) or a duration back from "
                   "now: a whole number and s, m, h, d or w (90m, 2h, 3d).")
@click.option("--dry-run", is_flag=True, help="With --dead: say how many steps match; change "
                                              "nothing.")
@click.pass_context
def replay(ctx: click.Context, ref: str | None, tenant: str, every_dead: bool,
           channel: str | None, kind: str | None, since: int | None, dry_run: bool) -> None:
    """Put dead or unknown steps back to pending, under their original key and frozen payload.

    REF is a step (n_...:STEP_NO), or a notification (n_... or user_id:dedup_key) for all its
    dead and unknown steps. With --dead instead, every step that ended dead before the command
    started (filtered by --channel, --kind and --since) is replayed in batches of
    200, each one short write, with a progress bar; a running daemon then sends them at each
    channel's rate.

    Example: notifyd replay n_01m8n828e4dmgf5p4k:1

    Example: notifyd replay --dead --channel email --since 2h --dry-run
    """
    if every_dead == (ref is not None):
        raise click.UsageError("give REF or --dead, not both")
    if not every_dead and (channel or kind or since is not None or dry_run):
        raise click.UsageError("--channel, --kind, --since and --dry-run go with --dead")
    if every_dead:
        match = DeadMatch(SystemClock().now_ms(), since or 0, channel, kind)
        _replay_dead(ctx, match, dry_run)
        return
    assert ref is not None
    step_ref = STEP_REF.fullmatch(ref)
    catalog = config_of(ctx).catalog

    async def run(store: ReplayByRef) -> tuple[str, int, list[str]]:
        if step_ref is not None:
            nid, step = step_ref.group(1), int(step_ref.group(2))
            count = await store.replay(nid, step, "cli")
        else:
            nid = (await _find(store, ref, tenant)).id
            count = await store.replay(nid, None, "cli")
        return nid, count, await replays.blocked(store, nid, catalog)

    nid, count, blocked = with_store(ctx, run, WRITE)
    if not count:
        raise click.ClickException(f"no dead or unknown step at {ref!r}")
    click.echo(replay_said(count, nid))
    for line in blocked:
        click.echo(f"warning: {line}", err=True)


def _replay_dead(ctx: click.Context, match: DeadMatch, dry_run: bool) -> None:
    """Every dead step `match` picks, back to pending (engine/replay.replay_dead)."""
    if match.channel is not None and match.channel not in config_of(ctx).channels:
        click.echo(f"warning: channel {match.channel!r} is not in this config; its replayed "
                   "steps end dead again when the daemon next starts", err=True)

    async def run(store: replays.BulkReplayStore) -> replays.Replayed:
        if dry_run:
            return replays.Replayed(await store.dead_count(match), 0, 0)
        with click.progressbar(length=await store.dead_count(match), label="replaying",
                               file=sys.stderr) as bar:
            return await replays.replay_dead(store, match, "cli", bar.update)

    said, warning = dead_replay_said(with_store(ctx, run, READ if dry_run else WRITE), dry_run)
    click.echo(said)
    if warning:
        click.echo(f"warning: {warning}", err=True)


def replay_said(count: int, nid: str) -> str:
    """What `notifyd replay REF` did."""
    return (f"replayed {plural(count, 'step')} of {nid}; a running daemon sends {them(count)} "
            "within its poll interval (notifyd inspect shows what happens)")


def dead_replay_said(done: replays.Replayed, dry_run: bool) -> tuple[str, str]:
    """What `notifyd replay --dead` did (or, dry, would do), and a warning ('': none)."""
    if dry_run or not done.matched:
        said = "no dead step matches" if not done.matched else \
            f"{plural(done.matched, 'dead step')} match{'es' if done.matched == 1 else ''}"
        return f"{said}; nothing replayed{' (--dry-run)' if dry_run else ''}", ""
    return (f"replayed {plural(done.replayed, 'dead step')}; a running daemon sends "
            f"{them(done.replayed)} at each channel's rate (notifyd inspect shows what "
            "happens)", replays.late_said(done))


@main.command("dead-letters")
@global_options
@click.option("--limit", default=50, show_default=True, help="Most rows shown, newest first.")
@click.pass_context
def dead_letters(ctx: click.Context, limit: int) -> None:
    """List dead steps with the failure that killed them.

    Example: notifyd dead-letters --limit 20
    """
    rows = with_store(ctx, lambda s: s.dead_letters(limit))
    for r in rows:
        click.echo(f"{iso(r.updated_at)}  {r.notification_id}:{r.step_no}  "
                   f"{r.channel}  attempts={r.attempts}  {r.reason}")
    if not rows:
        click.echo("no dead letters")
