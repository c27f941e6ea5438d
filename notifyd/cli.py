"""Thin click commands over the same store the daemon uses; each works beside a running daemon.

Commands that only read refuse a database that does not exist (naming the path) instead of leaving
a fresh one behind; commands that write say which database they wrote to. Ordinary mistakes are
one line naming the problem and the fix, never a traceback.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import re
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from notifyd.channels.webpush import generate_vapid_keys
from notifyd.config import NAME_RE, Config, load_config, render_example
from notifyd.core.catalog import Catalog
from notifyd.core.clock import SystemClock
from notifyd.core.contacts import SUPPRESSION_TYPES
from notifyd.core.errors import ConfigError, DomainError
from notifyd.core.fields import MAX_SEC
from notifyd.core.logs import LOG_FORMATS, LOG_LEVELS
from notifyd.core.models import ALL_SCOPES, REPLAYED, SCOPES
from notifyd.core.records import Aged, Storage
from notifyd.core.text import iso, plural
from notifyd.domain import events, signed, suppressions
from notifyd.domain.recipients import dead_reason, has_contact
from notifyd.domain.views import status_view, timeline
from notifyd.engine import resolution
from notifyd.engine.render import load_templates, requirements
from notifyd.engine.retention import Retention, windows
from notifyd.engine.templates import MEDIA, TemplateError, Templates, write_starter
from notifyd.http.auth import hash_key, new_key
from notifyd.store import (
    DeadMatch,
    Notification,
    Store,
    StoreLocked,
    StoreUnavailable,
    hold,
    open_store,
    sqlite_path,
)
from notifyd.store import restore as restore_store

T = TypeVar("T")
READ, WRITE, CREATE = "read", "write", "create"  # what a command does to the database
EVENT_PAGE = 500  # an event's notifications read at a time by inspect --event
FOLLOW_SEC = 0.5  # events show --follow reads the event again this often


def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """--config and --db work before the subcommand or after it, as people type them."""
    if value is not None:
        ctx.find_root().ensure_object(dict)[param.name or ""] = value


def global_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--config", "-c", "config_path", envvar="NOTIFYD_CONFIG",
                     type=click.Path(dir_okay=False), expose_value=False, callback=_remember,
                     help="TOML config file (default: built-in).")(f)
    return click.option("--db", envvar="NOTIFYD_DB", expose_value=False, callback=_remember,
                        help="The database (a path or sqlite:///path); overrides store.url.")(f)


def _config(ctx: click.Context) -> Config:
    obj: dict[str, Any] = ctx.find_root().ensure_object(dict)
    if "config" not in obj:
        try:
            obj["config"] = _load(obj)
        except ConfigError as e:
            raise click.ClickException(f"config error: {e}") from None
    return obj["config"]  # type: ignore[no-any-return]


def _load(obj: dict[str, Any]) -> Config:
    """The config file (or the built-in one) with --db; ConfigError names what is wrong."""
    cfg = load_config(obj.get("config_path"))
    if obj.get("db"):
        cfg = dataclasses.replace(cfg, store=dataclasses.replace(cfg.store, url=obj["db"]))
    return cfg


def database(cfg: Config) -> str:
    """The database as people should read it: an absolute path for SQLite."""
    path = sqlite_path(cfg.store.url)
    return str(Path(path).resolve()) if path is not None else cfg.store.url


def _with_store(ctx: click.Context, fn: Callable[[Store], Awaitable[T]], mode: str = READ) -> T:
    cfg = _config(ctx)

    async def run() -> T:
        store = await open_store(cfg.store.url, SystemClock(), sqlite=cfg.store.sqlite,
                                 create=mode == CREATE)
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


@click.group(invoke_without_command=True)
@global_options
@click.version_option(package_name="notifyd")
@click.pass_context
def main(ctx: click.Context) -> None:
    """notifyd: notifications that escalate across channels and know when to stop.

    Example: notifyd serve
    """
    ctx.ensure_object(dict)
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@main.command()
@global_options
@click.option("--host", help="Override server.host.")
@click.option("--port", type=click.IntRange(0, 65535), help="Override server.port (0: any free).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="info",
              show_default=True, help="Least severe log lines written.")
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default="text", show_default=True,
              help="text lines, or one JSON object per line for a log shipper.")
@click.option("--access-log", is_flag=True, help="Also log one line per HTTP request.")
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None, log_level: str,
          log_format: str, access_log: bool) -> None:
    """Run the daemon: HTTP API, scanner and senders, until SIGTERM; SIGHUP reloads the config.

    Example: notifyd --config /etc/notifyd/notifyd.toml serve --port 7726
    """
    from notifyd.core.logs import setup_logging
    from notifyd.daemon import StartError
    from notifyd.daemon import serve as run_serve

    def overridden(cfg: Config) -> Config:
        return dataclasses.replace(cfg, server=dataclasses.replace(
            cfg.server, host=host or cfg.server.host,
            port=cfg.server.port if port is None else port))

    cfg = overridden(_config(ctx))
    obj = ctx.find_root().obj
    setup_logging(log_level, log_format)
    try:  # a reload (SIGHUP) reads the file again, under the same command line
        run_serve(cfg, config_path=obj.get("config_path"), access_log=access_log,
                  load=lambda: overridden(_load(obj)))
    except StartError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("path", default="notifyd.toml", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(path: str, force: bool) -> None:
    """Write a commented starter config with every key and its default (- for standard output).

    Example: notifyd init /etc/notifyd/notifyd.toml
    """
    if path == "-":
        click.echo(render_example(), nl=False)
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise click.ClickException(f"the folder {target.parent.resolve()} does not exist; "
                                   f"create it first (mkdir -p {target.parent})")
    if target.exists() and not force:
        raise click.ClickException(f"{path} exists; pass --force to overwrite it")
    target.write_text(render_example())
    click.echo(f"wrote {path}; start with: notifyd --config {path} serve")
    folder = target.parent / "templates"
    try:
        written = write_starter(folder)
    except FileExistsError:
        click.echo(f"{folder} has templates already; left as it is")
    else:
        click.echo(f"wrote {plural(len(written), 'file')} of starter templates in {folder} "
                   "(a sample kind, payment_failed, in en and de; see its README.txt)")


@main.group()
def keys() -> None:
    """Create, list and revoke API keys.

    Example: notifyd keys create --name billing --kinds payment_failed
    """


@keys.command("create")
@global_options
@click.option("--name", required=True, help="A name for the key, shown in inspect.")
@click.option("--tenant", default="default", show_default=True,
              help="The tenant whose recipients this key may post to.")
@click.option("--kinds", default="", help="Comma-separated kinds this key may post and whose inbox items it "
              "may see (default all).")
@click.option("--scopes", default=",".join(sorted(SCOPES)), show_default=True,
              help="What it may do: post, read, resolve, users (profiles and contacts), topics "
                   "(manage topics, send events to them) and everyone (send events to every "
                   "user of the tenant: never given unless named).")
@click.pass_context
def keys_create(ctx: click.Context, name: str, tenant: str, kinds: str, scopes: str) -> None:
    """Create an API key and print it once; only its hash is stored. Creates the database if
    there is none yet.

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
    may = frozenset(s.strip() for s in scopes.split(",") if s.strip())
    if not may or not may <= ALL_SCOPES:
        raise click.ClickException(f"--scopes: choose from {', '.join(sorted(ALL_SCOPES))}")
    key = new_key()

    async def create(s: Store) -> bool:
        if any(k.name == name for k in await s.list_keys()):
            return False
        await s.create_key(hash_key(key), name, tenant, allowed, may)
        return True

    if not _with_store(ctx, create, CREATE):
        raise click.ClickException(f"a key named {name!r} exists")
    click.echo(key)
    click.echo(f"key {name!r} for tenant {tenant!r}: shown once, store it now", err=True)


@keys.command("list")
@global_options
@click.pass_context
def keys_list(ctx: click.Context) -> None:
    """List keys by name (never the keys themselves).

    Example: notifyd keys list
    """
    for k in _with_store(ctx, lambda s: s.list_keys()):
        state = "revoked" if k.revoked_at else "active"
        click.echo(f"{k.name}\ttenant={k.tenant}\tkinds={','.join(k.kinds) or '*'}\t"
                   f"scopes={','.join(k.scopes)}\t{state}")


@keys.command("revoke")
@global_options
@click.argument("name")
@click.pass_context
def keys_revoke(ctx: click.Context, name: str) -> None:
    """Revoke a key; a running daemon stops honouring it within seconds.

    Example: notifyd keys revoke billing
    """
    if not _with_store(ctx, lambda s: s.revoke_key(name), WRITE):
        raise click.ClickException(f"no active key named {name!r}")
    click.echo(f"revoked {name}")


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


async def _find(store: Store, ref: str, tenant: str) -> Notification:
    parsed, within = _ref(ref, tenant)
    n = await resolution.find(store, parsed, within)
    if n is None:
        raise _no_such(ref, within)
    return n


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

    REF is a notification id (n_...) or user_id:dedup_key (split on the last colon). With
    --event ID, the event and a line per notification it made: the recipient, the kind, its
    state and each step (notifyd inspect n_... then shows one whole).

    Example: notifyd inspect u_42:invoice-1009
    """
    if (ref is None) == (event_id is None):
        raise click.UsageError("give REF (a notification) or --event ID, one of them")
    if event_id is not None:
        if as_json:
            raise click.UsageError("--json with --event: notifyd events show ID prints the "
                                   "event's document")
        _inspect_event(ctx, tenant, event_id)
        return
    assert ref is not None
    n = _with_store(ctx, lambda s: _find(s, ref, tenant))
    if as_json:
        click.echo(json.dumps(status_view(n, SystemClock().now_ms()), indent=2))
    else:
        click.echo("\n".join(timeline(n, SystemClock().now_ms())))


def _inspect_event(ctx: click.Context, tenant: str, event_id: str) -> None:
    """The event's summary, then its notifications a page at a time, by recipient."""

    async def run(store: Store) -> None:
        e = await store.get_event(tenant, event_id)
        if e is None:
            raise click.ClickException(f"no event {event_id!r} in tenant {tenant!r} (--tenant)")
        now = SystemClock().now_ms()
        click.echo("\n".join(events.summary(e, await store.event_counts(tenant, event_id),
                                            now)))
        after = ("", "")
        while page := await store.event_notifications(tenant, event_id, after, EVENT_PAGE):
            click.echo("\n".join(events.ladder_line(n, now) for n in page))
            after = (page[-1].user_id, page[-1].id)

    _with_store(ctx, run)


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

    async def run(store: Store) -> str:
        parsed, within = _ref(ref, tenant)
        r = await resolution.resolve(store, parsed, what, "cli", within)
        if r is None:
            raise _no_such(ref, within)
        if not r.changed:
            return f"{r.notification_id} was already resolved: {r.resolution}"
        return (f"{r.notification_id} resolved: {r.resolution}; cancelled "
                f"{plural(r.cancelled_steps, 'step')}")

    click.echo(_with_store(ctx, run, WRITE))


STEP_REF = re.compile(rf"({resolution.ID_RE.pattern}):(\d+)")
# Steps per write of a bulk replay: about 25 ms of the writer each (measured on 30k dead steps,
# two shared cores), so the daemon's own writes (accepts, claims) go between the batches.
REPLAY_BATCH = 200
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
    catalog = _config(ctx).catalog

    async def run(store: Store) -> tuple[str, int, list[str]]:
        if step_ref is not None:
            nid, step = step_ref.group(1), int(step_ref.group(2))
            count = await store.replay(nid, step)
        else:
            nid = (await _find(store, ref, tenant)).id
            count = await store.replay(nid, None)
        return nid, count, await _blocked(store, nid, catalog)

    nid, count, blocked = _with_store(ctx, run, WRITE)
    if not count:
        raise click.ClickException(f"no dead or unknown step at {ref!r}")
    click.echo(f"replayed {plural(count, 'step')} of {nid}; a running daemon sends them within "
               "its poll interval (notifyd inspect shows what happens)")
    for line in blocked:
        click.echo(f"warning: {line}", err=True)


def _replay_dead(ctx: click.Context, match: DeadMatch, dry_run: bool) -> None:
    """Every dead step `match` picks, back to pending a batch at a time (each its own short
    write, so a running daemon's accepts and claims go between), along a cursor: the batches
    already replayed are never read again."""
    if match.channel is not None and match.channel not in _config(ctx).channels:
        click.echo(f"warning: channel {match.channel!r} is not in this config; its replayed "
                   "steps end dead again when the daemon next starts", err=True)

    async def run(store: Store) -> tuple[int, int, int]:
        total = await store.dead_count(match)
        if dry_run or not total:
            return total, 0, 0
        replayed = late = 0
        after = None
        with click.progressbar(length=total, label="replaying", file=sys.stderr) as bar:
            while page := await store.dead_steps(match, after, REPLAY_BATCH):
                replayed += await store.replay_steps([d.key for d in page])
                late += sum(d.expires_at <= match.until for d in page)
                bar.update(len(page))
                after = page[-1]
        return total, replayed, late

    total, replayed, late = _with_store(ctx, run, READ if dry_run else WRITE)
    if dry_run or not total:
        said = "no dead step matches" if not total else \
            f"{plural(total, 'dead step')} match{'es' if total == 1 else ''}"
        click.echo(f"{said}; nothing replayed{' (--dry-run)' if dry_run else ''}")
        return
    click.echo(f"replayed {plural(replayed, 'dead step')}; a running daemon sends them at each "
               "channel's rate (notifyd inspect shows what happens)")
    if late:
        click.echo(f"warning: {late} of them belong to notifications past their time to live; "
                   "the claim ends those expired, unsent", err=True)


async def _blocked(store: Store, nid: str, catalog: Catalog) -> list[str]:
    """Replayed steps that the claim will suppress as things stand, and why: replaying does not
    bring a dead address back, and saying nothing would look like a send."""
    n = await store.get_notification(nid)
    if n is None:
        return []
    r = await store.get_recipient(n.tenant, n.user_id)
    out = []
    for s in n.steps:
        contact = catalog.contact(s.channel)
        if s.reason != REPLAYED or contact is None:
            continue
        dead = dead_reason(r, contact)
        if not has_contact(r, contact):
            out.append(f"step {s.step_no} ({s.channel}) will be suppressed: the user has no "
                       f"{contact}")
        elif dead is not None:
            out.append(f"step {s.step_no} ({s.channel}) will be suppressed: its {contact} is "
                       f"disabled ({dead}); a new address for the user makes it live")
    return out


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
    rows = _with_store(ctx, lambda s: s.suppressions(tenant, address, limit))
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
    added = _with_store(ctx, lambda s: s.suppress(tenant, channel_type, address, reason,
                                                  "cli"), WRITE)
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
    if not _with_store(ctx, lambda s: s.unsuppress(tenant, channel_type, address), WRITE):
        raise click.ClickException(f"{channel_type} {address} is not on tenant {tenant}'s list")
    click.echo(f"removed: {channel_type} {address} for tenant {tenant}")


@main.command("dead-letters")
@global_options
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



@main.command()
@global_options
@click.option("--url", help="The daemon's address (default: http://server.host:server.port).")
@click.pass_context
def stats(ctx: click.Context, url: str | None) -> None:
    """Print the running daemon's figures (its GET /metrics) for a terminal.

    Example: notifyd --config /etc/notifyd/notifyd.toml stats
    """
    import urllib.error
    import urllib.request

    from notifyd.engine.metrics import summary

    cfg = _config(ctx)
    base = url or f"http://{cfg.server.host}:{cfg.server.port}"
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as resp:
            text = resp.read().decode()
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise click.ClickException(f"cannot reach the daemon at {base} ({reason}); is it "
                                   "running? (--url, or the config's server.host/port)") from None
    click.echo("\n".join(summary(text)))


@main.command()
@global_options
@click.argument("dest", type=click.Path(dir_okay=False))
@click.pass_context
def backup(ctx: click.Context, dest: str) -> None:
    """Copy the database to DEST, consistent and compact, beside a running daemon.

    To restore: stop notifyd, move the database and its -wal and -shm files away, copy the
    backup to the database's path, start notifyd.

    Example: notifyd --config /etc/notifyd/notifyd.toml backup /var/backups/notifyd-1.db
    """
    if Path(dest).exists():
        raise click.ClickException(f"{dest} exists; choose a new file")
    if not Path(dest).resolve().parent.is_dir():
        raise click.ClickException(f"the folder {Path(dest).resolve().parent} does not exist")
    _with_store(ctx, lambda s: s.backup(str(Path(dest).resolve())))
    click.echo(f"backed up to {dest}")


@main.command()
@global_options
@click.argument("backup_file", type=click.Path(dir_okay=False))
@click.pass_context
def restore(ctx: click.Context, backup_file: str) -> None:
    """Put a backup (notifyd backup made it) in place of the database.

    The daemon must be stopped. The backup is checked whole first; the database it replaces is
    moved aside beside it (with its -wal and -shm files), never deleted.

    Example: notifyd --config /etc/notifyd/notifyd.toml restore /var/backups/notifyd-1.db
    """
    cfg = _config(ctx)
    try:
        held = hold(cfg.store.url)
    except StoreLocked:
        raise click.ClickException(f"a notifyd daemon is running on {database(cfg)}; stop it "
                                   "first (systemctl stop notifyd)") from None
    except StoreUnavailable as e:
        raise click.ClickException(str(e)) from None
    try:
        count, aside = restore_store(cfg.store.url, backup_file)
    except StoreUnavailable as e:
        raise click.ClickException(f"not restored: {e}") from None
    finally:
        if held is not None:
            held.release(undo=True)
    click.echo(f"restored {database(cfg)} from {backup_file} ({plural(count, 'notification')})")
    if aside:
        click.echo(f"the database it replaced is at {aside}; delete it once all is well")


@main.command()
@global_options
@click.option("--dry-run", is_flag=True, help="Count what would go; remove nothing.")
@click.pass_context
def prune(ctx: click.Context, dry_run: bool) -> None:
    """Remove what has aged out ([retention]) now, as the running daemon does on its own.

    Safe beside a running daemon: each batch is one short write.

    Example: notifyd prune --dry-run
    """
    cfg = _config(ctx)
    found = windows(cfg.retention)

    async def run(store: Store) -> tuple[dict[Aged, int], Storage]:
        if dry_run:
            counts = {what: await store.prunable(what, ms) for what, ms in found}
        else:
            counts = await Retention(cfg.retention, store, SystemClock()).run_once()
        return counts, await store.storage()

    counts, space = _with_store(ctx, run, READ if dry_run else WRITE)
    verb = "would go" if dry_run else "removed"
    for what, ms in found:
        click.echo(f"{PRUNED[what]:<52} older than {_days(ms)}: {counts[what]:,} {verb}")
    for what in set(Aged) - {w for w, _ in found}:
        click.echo(f"{PRUNED[what]:<52} kept forever (retention settings)")
    click.echo(f"database: {space.bytes / 2**20:.1f} MiB on disk, {space.free_bytes / 2**20:.1f} "
               "MiB free inside (notifyd vacuum gives it back)")


PRUNED = {Aged.HISTORY: "history of finished notifications (notifications)",
          Aged.IDENTITIES: "identities left by pruned histories",
          Aged.RECEIPTS: "providers' receipts",
          Aged.INBOX_DONE: "inbox items read or archived",
          Aged.INBOX_OLD: "inbox items, read or not",
          Aged.EVENTS: "routed events",
          Aged.MEMBERS: "ended topic memberships"}


def _days(ms: int) -> str:
    days = ms / 86_400_000
    if days < 1:
        return f"{ms / 1000:g} s"
    return f"{days:g} day" + ("" if days == 1 else "s")


@main.command()
@global_options
@click.option("--full", is_flag=True, help="Rebuild the whole file: the daemon must be stopped, "
              "and it needs as much free disk as the file.")
@click.pass_context
def vacuum(ctx: click.Context, full: bool) -> None:
    """Give the database's free space back to the file system now.

    Retention does this as it goes; without --full this is safe beside a running daemon.

    Example: notifyd vacuum
    """
    cfg = _config(ctx)
    held = None
    if full:
        try:
            held = hold(cfg.store.url)
        except StoreLocked:
            raise click.ClickException("--full needs the daemon stopped (it holds the database "
                                       "while it rebuilds); without --full it may run") from None
        except StoreUnavailable as e:
            raise click.ClickException(str(e)) from None

    async def run(store: Store) -> tuple[int, int]:
        before = (await store.storage(count=False)).bytes
        if full:
            await store.compact()
        else:
            await Retention(cfg.retention, store, SystemClock()).reclaim()
        return before, (await store.storage(count=False)).bytes

    try:
        before, after = _with_store(ctx, run, WRITE)
    finally:
        if held is not None:
            held.release()
    click.echo(f"{database(cfg)}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")


@main.group()
def templates() -> None:
    """Check and preview message templates.

    Example: notifyd --config notifyd.toml templates check
    """


@templates.command("check")
@global_options
@click.pass_context
def templates_check(ctx: click.Context) -> None:
    """Load every template as serve would and name each problem (a missing file, a syntax error).

    Example: notifyd --config notifyd.toml templates check
    """
    cfg = _config(ctx)
    found, problems = load_templates(cfg)
    for line in problems:
        click.echo(line, err=True)
    if problems:
        raise click.ClickException(f"{plural(len(problems), 'problem')} in {cfg.templates.folder}")
    if found is None:
        click.echo("no kind needs templates, and there is no templates folder")
        return
    need = requirements(cfg)
    for kind, media in sorted(need.items()):
        click.echo(f"{kind}: {', '.join(sorted(media))} ok")
    if not need:
        click.echo(f"{cfg.templates.folder}: ok (no configured kind sends through templates yet)")


@templates.command("render")
@global_options
@click.argument("kind")
@click.option("--channel", "channel", required=True,
              help="A configured channel, or a medium: email, sms, push, chat, inbox.")
@click.option("--locale", default=None, help="The recipient's locale (default: the default).")
@click.option("--params", default="{}", help="The notification's params, as JSON.")
@click.pass_context
def templates_render(ctx: click.Context, kind: str, channel: str, locale: str | None,
                     params: str) -> None:
    """Render KIND's templates for a channel as a recipient with LOCALE would get them.

    Example: notifyd templates render payment_failed --channel email --locale de
    --params '{"amount": "9.90 EUR", "invoice": "1009", "url": "https://x.io/i/1009"}'
    """
    cfg = _config(ctx)
    medium = cfg.catalog.medium(channel) if channel in cfg.catalog.channels else channel
    if medium is None or medium not in MEDIA:
        raise click.ClickException(f"--channel: {channel!r} is neither a channel with templates "
                                   f"nor a medium ({', '.join(MEDIA)})")
    try:
        values = json.loads(params)
    except ValueError as e:
        raise click.ClickException(f"--params: not JSON ({e})") from None
    if not isinstance(values, dict):
        raise click.ClickException("--params: must be a JSON object")
    folder = Path(cfg.templates.folder)
    if not folder.is_dir():
        raise click.ClickException(f"no templates folder at {folder} (notifyd init writes one)")
    found = Templates(folder, cfg.templates.default_locale, cfg.templates.max_output_bytes)
    try:
        click.echo(found.preview(kind, medium, locale, values))
    except TemplateError as e:
        raise click.ClickException(f"{e.template}: {type(e.error).__name__}: {e.error}") from None


@main.group()
def vapid() -> None:
    """VAPID keys for web push.

    Example: notifyd vapid generate
    """


@vapid.command("generate")
def vapid_generate() -> None:
    """Print a new VAPID key pair: the private key for the webpush channel's settings, the
    public key for the web page that subscribes (applicationServerKey).

    Example: notifyd vapid generate
    """
    private, public = generate_vapid_keys()
    click.echo(f"vapid_private_key = \"{private}\"   # the channel's settings; a secret")
    click.echo(f"public key (the page's applicationServerKey): {public}")


@main.group()
def inbox() -> None:
    """The in-app inbox's upkeep.

    Example: notifyd inbox rebuild-badges
    """


@inbox.command("rebuild-badges")
@global_options
@click.pass_context
def inbox_rebuild_badges(ctx: click.Context) -> None:
    """Recount every unread badge from the inbox rows (safe beside a running daemon).

    Example: notifyd --config /etc/notifyd/notifyd.toml inbox rebuild-badges
    """
    fixed = _with_store(ctx, lambda s: s.rebuild_badges(), WRITE)
    click.echo(f"{plural(fixed, 'badge')} had drifted and {'was' if fixed == 1 else 'were'} "
               "rebuilt" if fixed else "every badge matches its rows")


@main.group()
def tokens() -> None:
    """User tokens: what a person's page uses to read their own inbox and preferences.

    Example: notifyd tokens secret --tenant acme
    """


def _tenant_key(ctx: click.Context, tenant: str) -> bytes:
    return _with_store(ctx, lambda s: s.signing_key(signed.tenant_key_name(tenant)), WRITE)


def _b64(key: bytes) -> str:
    return base64.urlsafe_b64encode(key).decode().rstrip("=")


@tokens.command("secret")
@global_options
@click.option("--tenant", default="default", show_default=True)
@click.pass_context
def tokens_secret(ctx: click.Context, tenant: str) -> None:
    """Print the tenant's user-token key (base64url), made on first use, so a producer's
    backend can sign user tokens itself (README: "User tokens"). Keep it like an API key.

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
    overlap = _config(ctx).tokens.max_ttl_sec if overlap_sec is None else overlap_sec
    key = _with_store(ctx, lambda s: s.rotate_signing_key(signed.tenant_key_name(tenant),
                                                          overlap * 1000), WRITE)
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
    longest = _config(ctx).tokens.max_ttl_sec
    if ttl_sec > longest:
        raise click.ClickException(f"--ttl: at most {longest} (tokens.max_ttl_sec)")
    expires = SystemClock().now_ms() // 1000 + ttl_sec
    click.echo(signed.make_user_token(_tenant_key(ctx, tenant), tenant, user_id, expires))


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

    async def run(store: Store) -> dict[str, Any]:
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
        return events.event_view(e, await store.event_counts(tenant, event_id),
                                 SystemClock().now_ms())

    click.echo(json.dumps(_with_store(ctx, run), indent=2))


@main.group()
def experiment() -> None:
    """Experiments a developer runs to see notifyd's guarantees at work.

    Example: notifyd experiment recovery
    """


@experiment.command("recovery")
@click.option("--timeout-before-accept", is_flag=True,
              help="The provider times out before accepting, and Ada turns email off while her "
                   "send is in flight.")
def experiment_recovery(timeout_before_accept: bool) -> None:
    """The recovery experiment on the real engine, in private temporary files: where
    notifyd records permission to send, and how it recovers a send whose reply was lost.

    Example: notifyd experiment recovery --timeout-before-accept
    """
    from notifyd.experiment import main as run_experiment

    click.echo("\n".join(run_experiment(timeout_before_accept)))
