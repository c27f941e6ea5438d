"""Templates as a self-hoster meets them: notifyd init writes a starter folder, templates check
names each problem, templates render previews, serve refuses to start on a broken or missing
template naming the file, and vapid generate prints a key pair webpush accepts."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from engine_support import clean_env, notifyd_cmd

from notifyd.channels.webpush import WebPushSettings, vapid_public_key
from notifyd.cli import main

ENV = {"NOTIFYD_DB": None, "NOTIFYD_CONFIG": None}
KINDS = """
[channels.mail]
type = "smtp"
host = "127.0.0.1"
from_address = "ops@example.com"
tls = "none"

[kinds.payment_failed]
ladder = [{ channel = "mail" }]
"""


def _init(tmp_path: Path) -> Path:
    config = tmp_path / "notifyd.toml"
    result = CliRunner().invoke(main, ["init", str(config)], env=ENV)
    assert result.exit_code == 0, result.output
    assert "starter templates" in result.output
    config.write_text(config.read_text() + KINDS)
    return config


def test_init_writes_templates_that_check_and_render(tmp_path: Path) -> None:
    config = _init(tmp_path)
    checked = CliRunner().invoke(main, ["--config", str(config), "templates", "check"], env=ENV)
    assert checked.exit_code == 0, checked.output
    assert "payment_failed: email ok" in checked.output
    shown = CliRunner().invoke(main, [
        "--config", str(config), "templates", "render", "payment_failed", "--channel", "mail",
        "--locale", "de-AT", "--params",
        '{"amount": "9.90 EUR", "invoice": "1009", "url": "https://x.io/i/1009"}'], env=ENV)
    assert shown.exit_code == 0, shown.output
    assert "payment_failed by email in de (asked de-AT)" in shown.output
    assert "Rechnung 1009" in shown.output
    again = CliRunner().invoke(main, ["init", "--force", str(config)], env=ENV)
    assert "has templates already; left as it is" in again.output


def test_the_starter_readmes_try_one_runs_as_written(tmp_path: Path) -> None:
    _init(tmp_path)
    text = (tmp_path / "templates" / "README.txt").read_text()
    [command] = [line.strip() for line in text.splitlines()
                 if line.strip().startswith("notifyd templates render")]
    args = shlex.split(command)[1:]
    done = subprocess.run([sys.executable, "-m", "notifyd", *args], capture_output=True,
                          text=True, env=clean_env(), cwd=tmp_path, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "Zahlung fehlgeschlagen: Rechnung 1009" in done.stdout


def test_a_broken_or_missing_template_is_named_and_stops_the_start(tmp_path: Path) -> None:
    config = _init(tmp_path)
    broken = tmp_path / "templates" / "payment_failed" / "en" / "email.subject.j2"
    broken.write_text("Payment {{ amount")
    checked = CliRunner().invoke(main, ["--config", str(config), "templates", "check"], env=ENV)
    assert checked.exit_code == 1
    assert "payment_failed/en/email.subject.j2: TemplateSyntaxError at line 1" in checked.output
    started = subprocess.run(notifyd_cmd(tmp_path / "n.db", "serve", "--port", "0",
                                         config=config), capture_output=True, text=True,
                             env=clean_env(), cwd=tmp_path, timeout=60)
    assert started.returncode == 1 and "Traceback" not in started.stderr
    assert "Error: templates: payment_failed/en/email.subject.j2: TemplateSyntaxError" in (
        started.stderr)
    assert not (tmp_path / "n.db").exists()  # refused before anything was created
    broken.unlink()
    started = subprocess.run(notifyd_cmd(tmp_path / "n.db", "serve", "--port", "0",
                                         config=config), capture_output=True, text=True,
                             env=clean_env(), cwd=tmp_path, timeout=60)
    assert "payment_failed/en/email.subject.j2: missing" in started.stderr


def test_vapid_generate_prints_a_pair_the_webpush_channel_accepts() -> None:
    result = CliRunner().invoke(main, ["vapid", "generate"])
    assert result.exit_code == 0
    private = result.output.split('vapid_private_key = "')[1].split('"')[0]
    public = result.output.split("applicationServerKey): ")[1].strip()
    assert vapid_public_key(private) == public
    settings = WebPushSettings(vapid_private_key=private, vapid_subject="mailto:ops@example.com")
    assert settings.problems() == []
