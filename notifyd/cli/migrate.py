"""Moving a SQLite installation to PostgreSQL: `notifyd migrate-store`."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from notifyd.cli.base import main
from notifyd.core.text import plural, redact_url
from notifyd.store import StoreLocked, StoreUnavailable, hold, is_postgres, sqlite_path

if TYPE_CHECKING:
    from notifyd.store.postgres.copy import Copied


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
    click.echo(copied_said(copied, path, target))


def copied_said(copied: list[Copied], path: str, target: str) -> str:
    """What `notifyd migrate-store` copied, a line per table, and what to do next."""
    width = max(len(c.table) for c in copied)
    shown = redact_url(target)
    hidden = ("with *** the password you gave --to (or the whole URL in a file that only "
              "notifyd reads, named by url_file) " if shown != target else "")
    tables = [f"{c.table:<{width}}  {c.rows:>10} {'row ' if c.rows == 1 else 'rows'}  checksum "
              f"{c.checksum}  matches" for c in copied]
    return "\n".join(tables) + (
        f"\n\nCopied {plural(sum(c.rows for c in copied), 'row')}; {path} is unchanged.\n"
        "Now set, in notifyd's config file:\n\n"
        "    [store]\n"
        f"    url = \"{shown}\"\n\n"
        f"{hidden}(and drop any --db option), then start notifyd on each host.")
