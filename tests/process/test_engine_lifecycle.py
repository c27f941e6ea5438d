"""The daemon's lifecycle under a service manager: READY=1 and STOPPING=1 through NOTIFY_SOCKET,
SIGTERM finishing in-flight sends within the grace period, a send outliving the grace resent under
its key on the next start, a second signal exiting at once, and the systemd unit that runs it.
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path

from engine_support import (
    Daemon,
    ThreadedProvider,
    clean_env,
    create_key,
    notify_socket,
    query,
    reaped,
    receive,
)

from notifyd.config import DaemonConfig

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 30.0

CONFIG = """
[scanner]
poll_interval_sec = 0.2

[daemon]
grace_sec = {grace}

[channels.hook]
type = "webhook"
url = "{url}"
timeout_sec = 30.0

[kinds.k]
ladder = [{{ channel = "hook" }}]
"""


def post(url: str, key: str, body: dict[str, object]) -> str:
    request = urllib.request.Request(f"{url}/v1/notifications", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {key}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as resp:
        assert resp.status == 202
        return str(json.loads(resp.read())["notification_id"])


def step_state(db: Path, nid: str) -> str:
    return str(query(db, "SELECT state FROM steps WHERE notification_id = ?", nid)[0][0])


def test_ready_then_stopping_through_notify_socket_and_a_clean_exit(tmp_path: Path) -> None:
    with notify_socket() as (sock, path), reaped([]) as daemons:
        daemons.append(d := Daemon(tmp_path / "n.db", env=clean_env(NOTIFY_SOCKET=path)))
        assert receive(sock, "READY=1") == ["READY=1"]
        d.signal(signal.SIGTERM)
        assert receive(sock, "STOPPING=1") == ["STOPPING=1"]
        assert d.wait(TIMEOUT) == 0, d.stderr()
        assert "stopped cleanly" in d.stderr()


def test_sigterm_lets_an_in_flight_send_finish_within_the_grace(tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    with ThreadedProvider() as prov, notify_socket() as (sock, path), reaped([]) as daemons:
        config.write_text(CONFIG.format(url=prov.url, grace=30.0))
        key = create_key(db, config)
        prov.gate.clear()
        daemons.append(d := Daemon(db, config, env=clean_env(NOTIFY_SOCKET=path)))
        receive(sock, "READY=1")
        nid = post(d.url, key, {"user_id": "u1", "kind": "k"})
        prov.wait_for_requests(1)
        d.signal(signal.SIGTERM)
        receive(sock, "STOPPING=1")
        assert step_state(db, nid) == "sending"
        prov.gate.set()  # the provider answers only after the daemon began stopping
        assert d.wait(TIMEOUT) == 0, d.stderr()
        assert step_state(db, nid) == "sent"
        assert [s.key for s in prov.snapshot()] == [f"{nid}:0"]


def test_a_send_outliving_the_grace_is_resent_under_its_key_on_the_next_start(
        tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    with ThreadedProvider() as prov, reaped([]) as daemons:
        config.write_text(CONFIG.format(url=prov.url, grace=0.3))
        key = create_key(db, config)
        prov.gate.clear()
        daemons.append(d := Daemon(db, config))
        nid = post(d.url, key, {"user_id": "u1", "kind": "k"})
        prov.wait_for_requests(1)
        d.signal(signal.SIGTERM)
        assert d.wait(TIMEOUT) == 0, d.stderr()
        assert "still in flight after the grace period" in d.stderr()
        assert step_state(db, nid) == "unknown"  # given back: the next start needs no lease wait

        prov.gate.set()
        daemons.append(again := Daemon(db, config))
        deadline = time.monotonic() + TIMEOUT
        while step_state(db, nid) != "sent":
            assert time.monotonic() < deadline, again.stderr()
            time.sleep(0.05)
        seen = prov.snapshot()
        assert [s.key for s in seen] == [f"{nid}:0", f"{nid}:0"]
        assert seen[0].body == seen[1].body
        again.signal(signal.SIGTERM)
        assert again.wait(TIMEOUT) == 0, again.stderr()


def test_a_second_signal_exits_at_once(tmp_path: Path) -> None:
    db, config = tmp_path / "n.db", tmp_path / "n.toml"
    with ThreadedProvider() as prov, notify_socket() as (sock, path), reaped([]) as daemons:
        config.write_text(CONFIG.format(url=prov.url, grace=600.0))
        key = create_key(db, config)
        prov.gate.clear()  # held until the test ends: without the second signal, a long wait
        daemons.append(d := Daemon(db, config, env=clean_env(NOTIFY_SOCKET=path)))
        receive(sock, "READY=1")
        nid = post(d.url, key, {"user_id": "u1", "kind": "k"})
        prov.wait_for_requests(1)
        d.signal(signal.SIGTERM)
        receive(sock, "STOPPING=1")
        d.signal(signal.SIGTERM)
        assert d.wait(TIMEOUT) == 128 + signal.SIGTERM
        assert "second signal: exiting at once" in d.stderr()
        assert step_state(db, nid) == "sending"  # retried as unknown once its lease ends


def test_the_systemd_unit_is_type_notify_restarts_on_failure_reloads_and_is_sandboxed() -> None:
    unit = (ROOT / "contrib" / "notifyd.service").read_text()
    lines = {ln.strip() for ln in unit.splitlines()}
    assert "Type=notify" in lines
    assert "Restart=on-failure" in lines
    assert any(ln.startswith("ExecStart=") and ln.endswith(" serve") for ln in lines)
    assert "ExecReload=/bin/kill -HUP $MAINPID" in lines  # systemctl reload: SIGHUP
    for option in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes",
                   "PrivateTmp=yes", "StateDirectory=notifyd"):
        assert option in lines, option
    stop = next(ln for ln in lines if ln.startswith("TimeoutStopSec="))
    assert float(stop.partition("=")[2]) > DaemonConfig().grace_sec  # not killed mid-grace
