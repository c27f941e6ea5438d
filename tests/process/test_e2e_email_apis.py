"""End to end: `notifyd serve` in a subprocess sends a kind's ladder through each email API
channel (ses, sendgrid, mailgun, postmark) to stand-ins speaking each provider's wire format, its
credentials taken as an operator gives them: from the environment (NOTIFYD_CHANNELS__...) and
from secret files (KEY_file). The SES stand-in recomputes each signature with botocore.

The stand-ins run on an event loop of their own (a thread); every wait is a condition polled with
a deadline. The daemon's log never shows a secret.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import fake_mailgun
import fake_postmark
import fake_sendgrid
import fake_ses
import tomli_w
from engine_support import Daemon, clean_env, notifyd_cmd, reaped
from fake_api import FakeApi
from loop_support import LoopThread

ADDRESS = "ada@example.org"
PROVIDERS = ("ses", "sendgrid", "mailgun", "postmark")
WAIT_SEC = 20.0
SECRETS = (fake_ses.ACCESS_KEY, fake_ses.SECRET_KEY, fake_sendgrid.API_KEY, fake_mailgun.API_KEY,
           fake_postmark.TOKEN)


def write_config(folder: Path, fakes: dict[str, FakeApi]) -> tuple[Path, dict[str, str]]:
    """The config file, the secret files beside it, and the environment that carries the rest."""
    secrets = {"ses.key": fake_ses.SECRET_KEY, "sendgrid.key": fake_sendgrid.API_KEY,
               "postmark.token": fake_postmark.TOKEN}
    for name, value in secrets.items():
        (folder / name).write_text(value + "\n")  # the trailing newline is not the secret's
    for kind in PROVIDERS:
        for part, text in (("subject", "Your {{ what }}"), ("text", "Hello,\n{{ what }}\n")):
            path = folder / "templates" / f"via_{kind}" / "en" / f"email.{part}.j2"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    config = folder / "notifyd.toml"
    config.write_text(tomli_w.dumps({
        "store": {"url": "notifyd.db", "sqlite": {"synchronous": "NORMAL"}},
        "templates": {"folder": "templates"},
        "channels": {
            "mail-ses": {"type": "ses", "region": fake_ses.REGION,
                         "secret_access_key_file": "ses.key", "from_address": fake_ses.SENDER,
                         "configuration_set": fake_ses.CONFIGURATION_SET,
                         "base_url": fakes["ses"].base_url},
            "mail-sendgrid": {"type": "sendgrid", "api_key_file": "sendgrid.key",
                              "from_address": fake_sendgrid.SENDER,
                              "base_url": fakes["sendgrid"].base_url},
            "mail-mailgun": {"type": "mailgun", "domain": fake_mailgun.DOMAIN,
                             "from_address": f"alerts@{fake_mailgun.DOMAIN}",
                             "base_url": fakes["mailgun"].base_url},
            "mail-postmark": {"type": "postmark", "server_token_file": "postmark.token",
                              "from_address": fake_postmark.SENDER,
                              "base_url": fakes["postmark"].base_url}},
        "kinds": {f"via_{p}": {"ladder": [{"channel": f"mail-{p}"}]} for p in PROVIDERS}}))
    env = {"NOTIFYD_CHANNELS__MAIL_SES__ACCESS_KEY_ID": fake_ses.ACCESS_KEY,
           "NOTIFYD_CHANNELS__MAIL_MAILGUN__API_KEY": fake_mailgun.API_KEY}
    return config, env


def api(daemon: Daemon, key: str, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        f"{daemon.url}{path}", method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{method} {path}: {e.code} {e.read()!r}\n{daemon.stderr()}") from e


def test_the_daemon_sends_through_each_email_api_with_keys_from_env_and_files(
        tmp_path: Path) -> None:
    loop = LoopThread()
    fakes: dict[str, FakeApi] = {
        "ses": fake_ses.FakeSes(), "sendgrid": fake_sendgrid.FakeSendgrid(),
        "mailgun": fake_mailgun.FakeMailgun(), "postmark": fake_postmark.FakePostmark()}
    try:
        for fake in fakes.values():
            loop.call(fake.start())
        config, env = write_config(tmp_path, fakes)
        db = tmp_path / "notifyd.db"
        made = subprocess.run(notifyd_cmd(db, "keys", "create", "--name", "t", config=config),
                              capture_output=True, text=True, env=clean_env(**env),
                              cwd=tmp_path, timeout=60, check=False)
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip()
        with reaped([]) as daemons:
            daemons.append(daemon := Daemon(db, config, env=clean_env(**env)))
            api(daemon, key, "PUT", "/v1/users/ada", {"email": ADDRESS})
            sent = {p: api(daemon, key, "POST", "/v1/notifications", {
                "user_id": "ada", "kind": f"via_{p}", "params": {"what": f"{p} digest"}})[
                "notification_id"] for p in PROVIDERS}
            for provider, nid in sent.items():
                step = wait_sent(daemon, key, nid)
                assert step["provider_ref"] in fakes[provider].sent, (provider, step)
            assert daemon.stop() == 0, daemon.stderr()
            log = daemon.stderr()
        ses = fakes["ses"]
        assert isinstance(ses, fake_ses.FakeSes) and ses.signatures_checked == 1
        for secret in SECRETS:
            assert secret not in log
    finally:
        for fake in fakes.values():
            loop.call(fake.stop())
        loop.close()


def wait_sent(daemon: Daemon, key: str, nid: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_SEC
    while True:
        step: dict[str, Any] = api(daemon, key, "GET", f"/v1/notifications/{nid}")["steps"][0]
        if step["status"] == "sent":
            return step
        if time.monotonic() > deadline:
            raise AssertionError(f"{nid} not sent within {WAIT_SEC} s: {step}\n"
                                 f"{daemon.stderr()}")
        time.sleep(0.02)
