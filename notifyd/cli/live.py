"""Talking to the running daemon over its API, as an operator trying it: post a test
notification (`send`) and follow the engine's decisions as they happen (`tail`, on GET
/v1/decisions/stream). Both go through notifyd.client with an API key (--key or NOTIFYD_KEY)."""

from __future__ import annotations

import json
import time
from typing import Any

import click

from notifyd.cli.base import daemon_url, global_options, key_option, main, need_key, url_option
from notifyd.client import Client, Event, NotifydError
from notifyd.client.types import NotificationOptions
from notifyd.core.text import plural

RECONNECT_SEC = (1, 2, 5)  # waits before following again, after a stream that was open ended


def _params(pairs: tuple[str, ...]) -> dict[str, str]:
    params = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        if not eq or not name:
            raise click.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--param")
        params[name] = value
    return params


def _refused(e: NotifydError) -> click.ClickException:
    field = f" ({e.field})" if e.field else ""
    return click.ClickException(f"{e.code}: {e.message}{field}")


@main.command()
@global_options
@click.argument("kind")
@click.argument("user_id")
@click.option("--param", "-p", "pairs", multiple=True, metavar="NAME=VALUE",
              help="A param of the notification, as text; repeat for more.")
@click.option("--dedup-key", help="Its dedup key: sending again with it is a retry, not a "
                                  "second notification.")
@key_option
@url_option
@click.pass_context
def send(ctx: click.Context, kind: str, user_id: str, pairs: tuple[str, ...],
         dedup_key: str | None, key: str | None, url: str | None) -> None:
    """Post a notification of KIND to USER_ID through the running daemon's API, as a producer
    would, and print its id (notifyd inspect ID follows it; notifyd tail shows it go).

    Example: notifyd send invoice_due u_42 --param invoice=1009 --dedup-key invoice-1009
    """
    api = Client(daemon_url(ctx, url), need_key(key))
    options: NotificationOptions = {"dedup_key": dedup_key} if dedup_key else {}
    try:
        done = api.post(user_id, kind, _params(pairs), **options)
    except NotifydError as e:
        raise _refused(e) from None
    said = "accepted" if done["created"] else "already accepted (the same dedup key)"
    click.echo(f"{done['notification_id']} {said}; state {done['state']}")


@main.command()
@global_options
@click.option("--kind", help="Only this kind's decisions.")
@click.option("--channel", help="Only this channel's.")
@click.option("--user", "user_id", help="Only this user's.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
@click.option("--count", type=click.IntRange(1), help="Stop after this many.")
@key_option
@url_option
@click.pass_context
def tail(ctx: click.Context, kind: str | None, channel: str | None, user_id: str | None,
         as_json: bool, count: int | None, key: str | None, url: str | None) -> None:
    """Follow the running daemon's decisions as they happen: accepts, each step's claim
    decision, sends and their outcomes (a key with the read scope sees its tenant's). Past
    decisions are not shown: notifyd inspect has them. Ctrl-C ends it; if the daemon
    restarts, it follows again.

    Example: notifyd tail --kind invoice_due --channel email
    """
    base = daemon_url(ctx, url)
    api = Client(base, need_key(key))
    shown, waits = 0, 0
    try:
        while True:
            try:
                for event in api.decisions(kind, channel, user_id):
                    waits = 0
                    if event.name == "open":
                        click.echo(f"(following the decisions at {base}; Ctrl-C ends)",
                                   err=True)
                    elif event.name in ("decision", "lost"):
                        click.echo(json.dumps(event.data) if as_json else decision_line(event))
                        shown += event.name == "decision"
                        if count is not None and shown >= count:
                            return
            except NotifydError as e:
                if e.status is not None or shown == 0 and waits == 0:
                    raise _refused(e) from None  # refused, or never reached: say so now
            wait = RECONNECT_SEC[min(waits, len(RECONNECT_SEC) - 1)]
            click.echo(f"(the stream from {base} ended; following again in {wait} s)", err=True)
            time.sleep(wait)
            waits += 1
    except KeyboardInterrupt:
        pass


def decision_line(event: Event) -> str:
    """One decision as `notifyd tail` prints it."""
    d: dict[str, Any] = event.data
    if event.name == "lost":
        return f"({plural(d['count'], 'decision')} lost: this terminal fell behind)"
    step = "" if d["step_no"] is None else f":{d['step_no']}"
    channel = f" channel={d['channel']}" if d["channel"] else ""
    reason = f" reason={d['reason']}" if d["reason"] else ""
    return (f"{d['at']} {d['decision']}: {d['notification_id']}{step}{channel} "
            f"kind={d['kind']} user={d['user_id']}{reason}")
