"""Templates as a self-hoster meets them: notifyd init writes a starter folder and a kind that
sends through it, which templates check names and the daemon sends in its words on the log
channel; templates check names each problem, templates render previews, serve refuses to start
on a broken or missing template naming the file, and vapid generate prints a key pair webpush
accepts."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from engine_support import Daemon, clean_env, create_key, notifyd_cmd

from notifyd.channels.webpush import WebPushSettings, vapid_public_key
from notifyd.cli import main
from notifyd.engine.starter import STARTER_PARAMS

ENV = {"NOTIFYD_DB": None, "NOTIFYD_CONFIG": None}


def _init(tmp_path: Path) -> Path:
    config = tmp_path / "notifyd.toml"
    result = CliRunner().invoke(main, ["init", str(config)], env=ENV)
    assert result.exit_code == 0, result.output
    assert "starter templates" in result.output
    return config


def test_init_writes_templates_that_check_and_render(tmp_path: Path) -> None:
    config = _init(tmp_path)
    checked = CliRunner().invoke(main, ["--config", str(config), "templates", "check"], env=ENV)
    assert checked.exit_code == 0, checked.output
    assert "payment_failed: email ok" in checked.output  # the log channel stands in for email
    shown = CliRunner().invoke(main, [
        "--config", str(config), "templates", "render", "payment_failed", "--channel", "log",
        "--locale", "de-AT", "--params",
        '{"amount": "9.90 EUR", "invoice": "1009", "url": "https://x.io/i/1009"}'], env=ENV)
    assert shown.exit_code == 0, shown.output
    assert "payment_failed by email in de (asked de-AT)" in shown.output
    assert "Rechnung 1009" in shown.output
    again = CliRunner().invoke(main, ["init", "--force", str(config)], env=ENV)
    assert "has templates already; left as it is" in again.output


def test_init_then_templates_check_passes_naming_the_kind(tmp_path: Path) -> None:
    def notifyd(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "notifyd", *args], capture_output=True,
                              text=True, env=clean_env(), cwd=tmp_path, timeout=60, check=False)

    made = notifyd("init", "notifyd.toml")
    assert made.returncode == 0, made.stderr
    checked = notifyd("--config", "notifyd.toml", "templates", "check")
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout == "payment_failed: email ok\n"


def _post(daemon: Daemon, key: str, method: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(daemon.url + path, data=json.dumps(body).encode(),
                                     method=method, headers={"Authorization": f"Bearer {key}",
                                                             "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


def test_the_daemon_on_the_init_config_sends_the_starter_kind_in_its_words(
        tmp_path: Path) -> None:
    config, db = _init(tmp_path), tmp_path / "notifyd.db"
    key = create_key(db, config)
    daemon = Daemon(db, config)
    try:
        params = json.loads(STARTER_PARAMS)
        status, _ = _post(daemon, key, "POST", "/v1/notifications", {
            "user_id": "u_42", "kind": "payment_failed", "params": params})
        assert status == 202
        [line] = daemon.wait_for_line("notifyd.channel.log: log: ")
        assert ('kind=payment_failed user=u_42 params=[\'amount\', \'invoice\', \'url\'] '
                'subject="Payment failed: invoice 1009" text="Hello,\\n\\nwe could not collect '
                '9.90 EUR for invoice 1009.\\nPlease update your payment details:\\n'
                'https://example.com/i/1009\\n\\nReference: n_') in line
        assert "(Failed payment)" in line  # the kind as a person reads it, not its identifier
        assert "<p>" not in line  # the html part says the same, at length
        # a person whose locale is de reads the German words
        assert _post(daemon, key, "PUT", "/v1/users/u_43", {"locale": "de"})[0] == 200
        status, _ = _post(daemon, key, "POST", "/v1/notifications", {
            "user_id": "u_43", "kind": "payment_failed", "params": params | {"invoice": "1010"}})
        assert status == 202
        [line] = daemon.wait_for_line('subject="Zahlung fehlgeschlagen: Rechnung 1010"')
        assert "9.90 EUR f" in line and "die Rechnung 1010 nicht einziehen" in line
        assert "(Fehlgeschlagene Zahlung)" in line
        # params the templates cannot render are refused, naming the template, before anything
        status, answer = _post(daemon, key, "POST", "/v1/notifications", {
            "user_id": "u_44", "kind": "payment_failed", "params": {"amount": "1 EUR"}})
        assert (status, answer["error"]["code"]) == (422, "invalid_field")
        assert answer["error"]["message"] == (
            "params: the template payment_failed/en/email.subject.j2 cannot render them "
            "(UndefinedError: 'invoice' is undefined)")
    finally:
        assert daemon.stop() == 0, daemon.stderr()


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed here")
def test_the_configs_own_example_posts_and_resolves_as_it_says(tmp_path: Path) -> None:
    """The curl call in the comment above the starter's kind, and the resolve it names."""
    config, db = _init(tmp_path), tmp_path / "notifyd.db"
    text = config.read_text()
    start = text.index("#   curl -X POST")
    call = "\n".join(line.removeprefix("#   ") for line in text[start:].split("\n#\n")[0]
                     .splitlines())
    [resolve] = re.findall(r"notifyd resolve [^ .]+", text)
    key = create_key(db, config)
    daemon = Daemon(db, config)
    try:
        call = call.replace("curl ", "curl -sS --fail-with-body ", 1).replace(
            "http://127.0.0.1:7726", daemon.url)
        done = subprocess.run(["bash", "-c", call], capture_output=True, text=True, timeout=60,
                              env=clean_env(KEY=key), check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["created"] is True
        daemon.wait_for_line('subject="Payment failed: invoice 1009"')
        done = subprocess.run(notifyd_cmd(db, *shlex.split(resolve)[1:], config=config),
                              capture_output=True, text=True, env=clean_env(), timeout=60,
                              check=False)
        assert done.returncode == 0, done.stderr
        assert "step 1 log: cancelled" in subprocess.run(
            notifyd_cmd(db, "inspect", "u_42:invoice-1009", config=config), capture_output=True,
            text=True, env=clean_env(), timeout=60, check=True).stdout
    finally:
        assert daemon.stop() == 0, daemon.stderr()


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
