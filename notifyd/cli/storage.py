"""The database: its figures, backups, restores, pruning and space, the inbox's badges."""

from __future__ import annotations

from pathlib import Path

import click

from notifyd.cli.base import (
    READ,
    WRITE,
    config_of,
    daemon_url,
    database,
    global_options,
    main,
    url_option,
    with_store,
)
from notifyd.core.clock import SystemClock
from notifyd.core.records import Aged, Storage
from notifyd.core.text import plural
from notifyd.engine.retention import Retention, windows
from notifyd.store import (
    RetentionStore,
    StoreLocked,
    StoreUnavailable,
    hold,
)
from notifyd.store import restore as restore_store


@main.command()
@global_options
@url_option
@click.pass_context
def stats(ctx: click.Context, url: str | None) -> None:
    """Print the running daemon's figures (its GET /metrics) for a terminal.

    Example: notifyd --config /etc/notifyd/notifyd.toml stats
    """
    import urllib.error
    import urllib.request

    from notifyd.engine.metrics import summary

    base = daemon_url(ctx, url)
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
    with_store(ctx, lambda s: s.backup(str(Path(dest).resolve())))
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
    cfg = config_of(ctx)
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
    cfg = config_of(ctx)
    found = windows(cfg.retention)

    async def run(store: RetentionStore) -> tuple[dict[Aged, int], Storage]:
        if dry_run:
            counts = {what: await store.prunable(what, ms) for what, ms in found}
        else:
            counts = await Retention(cfg.retention, store, SystemClock()).run_once()
        return counts, await store.storage()

    counts, space = with_store(ctx, run, READ if dry_run else WRITE)
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
    cfg = config_of(ctx)
    held = None
    if full:
        try:
            held = hold(cfg.store.url)
        except StoreLocked:
            raise click.ClickException("--full needs the daemon stopped (it holds the database "
                                       "while it rebuilds); without --full it may run") from None
        except StoreUnavailable as e:
            raise click.ClickException(str(e)) from None

    async def run(store: RetentionStore) -> tuple[int, int]:
        before = (await store.storage(count=False)).bytes
        if full:
            await store.compact()
        else:
            await Retention(cfg.retention, store, SystemClock()).reclaim()
        return before, (await store.storage(count=False)).bytes

    try:
        before, after = with_store(ctx, run, WRITE)
    finally:
        if held is not None:
            held.release()
    click.echo(f"{database(cfg)}: {before / 2**20:.1f} MiB -> {after / 2**20:.1f} MiB")



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
    click.echo(badges_said(with_store(ctx, lambda s: s.rebuild_badges(), WRITE)))


def badges_said(fixed: int) -> str:
    """What `notifyd inbox rebuild-badges` found."""
    return (f"{plural(fixed, 'badge')} had drifted and {'was' if fixed == 1 else 'were'} "
            "rebuilt" if fixed else "every badge matches its rows")
