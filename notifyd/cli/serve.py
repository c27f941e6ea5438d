"""Running notifyd: the daemon, a starter config, the recovery experiment."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from notifyd.cli.base import config_of, global_options, load_obj, main
from notifyd.config import Config
from notifyd.core.logs import LOG_FORMATS, LOG_LEVELS
from notifyd.core.text import plural
from notifyd.engine.starter import KIND, render_starter, write_starter


@main.command()
@global_options
@click.option("--host", help="Override server.host.")
@click.option("--port", type=click.IntRange(0, 65535), help="Override server.port (0: any free).")
@click.option("--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False), default="info",
              show_default=True, help="Least severe log lines written.")
@click.option("--log-format", type=click.Choice(LOG_FORMATS), default="text", show_default=True,
              help="text lines, or one JSON object per line for a log shipper.")
@click.option("--library-log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False),
              help="Least severe lines of the libraries notifyd runs on (aiosqlite, aiohttp) "
                   "[default: --log-level, but not below info].")
@click.option("--access-log", is_flag=True, help="Also log one line per HTTP request.")
@click.pass_context
def serve(ctx: click.Context, host: str | None, port: int | None, log_level: str,
          log_format: str, library_log_level: str | None, access_log: bool) -> None:
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

    cfg = overridden(config_of(ctx))
    obj = ctx.find_root().obj
    setup_logging(log_level, log_format, library_log_level)
    try:  # a reload (SIGHUP) reads the file again, under the same command line
        run_serve(cfg, config_path=obj.get("config_path"), access_log=access_log,
                  load=lambda: overridden(load_obj(obj)))
    except StartError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("path", default="notifyd.toml", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--force", is_flag=True, help="Overwrite an existing file.")
def init(path: str, force: bool) -> None:
    """Write a commented starter config with every key and its default, and a sample kind,
    payment_failed, that sends at once through starter templates on the log channel; the
    templates go in a folder beside it (- prints the config alone).

    Example: notifyd init /etc/notifyd/notifyd.toml
    """
    if path == "-":
        click.echo(render_starter(), nl=False)
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise click.ClickException(f"the folder {target.parent.resolve()} does not exist; "
                                   f"create it first (mkdir -p {target.parent})")
    if target.exists() and not force:
        raise click.ClickException(f"{path} exists; pass --force to overwrite it")
    target.write_text(render_starter())
    click.echo(f"wrote {path}: a sample kind, {KIND}, sends on the log channel; "
               f"start with: notifyd --config {path} serve")
    folder = target.parent / "templates"
    try:
        written = write_starter(folder)
    except FileExistsError:
        click.echo(f"{folder} has templates already; left as it is (notifyd --config {path} "
                   f"templates check says whether {KIND} has all it needs)")
    else:
        click.echo(f"wrote {plural(len(written), 'file')} of starter templates in {folder} "
                   f"({KIND}'s words in en and de; see its README.txt)")


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
