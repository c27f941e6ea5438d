"""Templates and the web push keys they are sent with."""

from __future__ import annotations

from pathlib import Path

import click

from notifyd.channels.webpush import generate_vapid_keys
from notifyd.cli.base import config_of, global_options, main
from notifyd.core.text import plural
from notifyd.engine.preview import PreviewError, preview
from notifyd.engine.render import load_templates, read_templates, requirements


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
    cfg = config_of(ctx)
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
    cfg = config_of(ctx)
    folder = Path(cfg.templates.folder)
    if not folder.is_dir():
        raise click.ClickException(f"no templates folder at {folder} (notifyd init writes one)")
    try:
        shown = preview(read_templates(cfg), cfg.catalog, kind, channel, locale, params)
    except PreviewError as e:
        raise click.ClickException(f"--{e.field}: {e}" if e.field else str(e)) from None
    click.echo(shown.text())


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
