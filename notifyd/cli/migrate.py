"""Moving a SQLite installation to PostgreSQL: `notifyd migrate-store`."""

from __future__ import annotations

import click

from notifyd.cli.base import main
from notifyd.store import StoreLocked, StoreUnavailable, hold, is_postgres, sqlite_path


@main.command(name="migrate-store")
@click.option("--from", "source", required=True, metavar="URL",
              help="The SQLite database: sqlite:///path/notifyd.db (notifyd stopped).")
@click.option("--to", "target", required=True, metavar="URL",
              help="An empty PostgreSQL database: postgresql://user@host/dbname.")
def migrate_store(source: str, target: str) -> None:
    """Copy every row of a SQLite database into an empty PostgreSQL database, verify each
    table's count and checksum, and leave the SQLite file as it was.

    Stop notifyd first (the file's lock is taken for the copy); afterwards point store.url at
    the new database and start notifyd, on as many hosts as you like.

    Example: notifyd migrate-store --from sqlite:////var/lib/notifyd/notifyd.db --to
    postgresql://notifyd@db.internal/notifyd
    """
    path = sqlite_path(source)
    if path is None or not is_postgres(target):
        raise click.UsageError("--from takes a sqlite:/// URL and --to a postgresql:// URL")
    from notifyd.store.postgres.copy import copy_store

    try:
        held = hold(source)
        assert held is not None
    except StoreLocked as e:
        raise click.ClickException(f"{e}; stop notifyd before copying its database") from None
    try:
        copied = copy_store(path, target)
    except StoreUnavailable as e:
        raise click.ClickException(str(e)) from None
    finally:
        held.release()
    width = max(len(c.table) for c in copied)
    for c in copied:
        click.echo(f"{c.table:<{width}}  {c.rows:>10} rows  checksum {c.checksum}  matches")
    click.echo(f"\nCopied {sum(c.rows for c in copied)} rows; {path} is unchanged.\n"
               "Now set, in notifyd's config file:\n\n"
               "    [store]\n"
               f"    url = \"{target}\"\n\n"
               "(and drop any --db option), then start notifyd on each host.")
