"""Config from the environment, as container users set it: NOTIFYD_<SECTION>_<KEY> for every key
that is not a list of tables (named entries as NOTIFYD_<TABLE>__<NAME>__<KEY>), winning over the
file; a secret read from a file (KEY_file, NOTIFYD_..._KEY_FILE); a bad value named by its
variable, never echoed."""

from __future__ import annotations

import base64
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.config import Config, env_table, load_config
from notifyd.core.environ import LIST, Table, overlay, variable
from notifyd.core.errors import ConfigError

SID = "AC" + "0" * 32
HOOK_SECRET = "whsec_" + base64.b64encode(b"k" * 24).decode()
SAMPLE = {str: "x", int: "7", float: "2.5", bool: "true", LIST: "a, b"}
PARSED = {str: "x", int: 7, float: 2.5, bool: True, LIST: ["a", "b"]}


def every_key(table: Table, path: tuple[str, ...] = (), named: int = -1
              ) -> list[tuple[tuple[str, ...], Any, bool, int]]:
    """Every key the environment may set: (path, type, secret, index of the entry name); a
    channel of each type, and an entry of every other table of named entries."""
    out = [((*path, name), key.type, key.secret, named) for name, key in table.keys.items()]
    for name, sub in table.tables.items():
        out += every_key(sub, (*path, name), named)
    for name, entry_of in table.named.items():
        types = CHANNEL_TYPES if name == "channels" else {"e": None}
        for type_name in types:
            entry = entry_of({"type": type_name})
            out += every_key(entry, (*path, name, f"e_{type_name}"), len(path) + 1)
    return out


KEYS = every_key(env_table())


def test_every_scalar_key_of_every_table_has_one_variable_and_it_sets_that_key() -> None:
    names = [variable(path, named) for path, *_, named in KEYS]
    assert len(KEYS) > 200 and len(set(names)) == len(names)  # none spelled twice
    assert "NOTIFYD_SERVER_PORT" in names and "NOTIFYD_STORE_SQLITE_BUSY_TIMEOUT_MS" in names
    assert "NOTIFYD_CHANNELS__E_TWILIO__AUTH_TOKEN" in names
    assert "NOTIFYD_WEBHOOKS_DELIVERY_RECEIPT_TENANTS__E_E__SECRET" in names
    assert {tp for _, tp, _, _ in KEYS} == set(SAMPLE)  # every scalar type is here
    for path, tp, _, named in KEYS:
        data: dict[str, Any] = {}
        if named >= 0 and path[0] == "channels":
            data = {"channels": {path[1]: {"type": path[1].removeprefix("e_")}}}
        var = variable(path, named)
        assert overlay(data, env_table(), {var: SAMPLE[tp]}, None) == {".".join(path): var}
        at: Any = data
        for part in path:
            at = at[part]
        assert at == PARSED[tp], var


def test_every_secret_may_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    secrets = [(path, named) for path, _, is_secret, named in KEYS if is_secret]
    assert len(secrets) >= 15
    assert {("console", "password"), ("egress", "https_proxy")} <= {p for p, _ in secrets}
    for path, named in secrets:
        data: dict[str, Any] = {}
        if path[0] == "channels":
            data = {"channels": {path[1]: {"type": path[1].removeprefix("e_")}}}
        overlay(data, env_table(), {variable(path, named) + "_FILE": str(secret)}, None)
        at: Any = data
        for part in path:
            at = at[part]
        assert at == "s3cret", path  # the trailing newline is not part of it


def config_file(tmp_path: Path, text: str = "") -> Path:
    path = tmp_path / "notifyd.toml"
    path.write_text(text)
    return path


def test_each_type_is_read_from_its_variable_and_wins_over_the_file(tmp_path: Path) -> None:
    path = config_file(tmp_path, '[server]\nport = 1000\n[daemon]\ngrace_sec = 1.0\n'
                                 '[kinds.alerts]\nbroadcast = false\nladder = [{channel = "log"}]\n'
                                 '[tenants.acme]\ncors_origins = ["https://old.example"]\n')
    cfg = load_config(path, {
        "NOTIFYD_SERVER_PORT": "8080",  # int
        "NOTIFYD_SERVER_PUBLIC_URL": "https://n.example",  # str
        "NOTIFYD_DAEMON_GRACE_SEC": "2.5",  # float
        "NOTIFYD_KINDS__ALERTS__BROADCAST": "yes",  # bool, of a named entry in the file
        "NOTIFYD_TENANTS__ACME__CORS_ORIGINS": "https://a.example, https://b.example",  # list
        "NOTIFYD_STORE_SQLITE_SYNCHRONOUS": "NORMAL",  # a table in a table
    })
    assert (cfg.server.port, cfg.server.public_url, cfg.daemon.grace_sec) == (
        8080, "https://n.example", 2.5)
    assert cfg.kinds["alerts"].broadcast is True
    assert cfg.kinds["alerts"].ladder[0].channel == "log"  # the rest of the entry is the file's
    assert cfg.tenants["acme"].cors_origins == ("https://a.example", "https://b.example")
    assert cfg.store.sqlite.synchronous == "NORMAL"


def test_without_a_file_the_environment_alone_configures_notifyd(tmp_path: Path) -> None:
    cfg = load_config(None, {"NOTIFYD_SERVER_HOST": "0.0.0.0",
                             "NOTIFYD_STORE_URL": "/var/lib/notifyd/notifyd.db",
                             "NOTIFYD_CONFIG": "ignored: the CLI's option", "NOTIFYD_DB": "too",
                             "OTHER": "x"})
    assert (cfg.server.host, cfg.store.url) == ("0.0.0.0", "/var/lib/notifyd/notifyd.db")
    assert dataclasses.replace(cfg, server=Config().server, store=Config().store) == load_config(
        None, {})


def test_a_channel_is_made_or_set_by_name_with_its_types_keys(tmp_path: Path) -> None:
    secret = tmp_path / "token"
    secret.write_text("twilio-token\r\n")
    path = config_file(tmp_path, f'[channels.ops-hook]\ntype = "webhook"\nurl = "https://h.example"\n'
                                 f'secret = "{HOOK_SECRET}"\n')
    cfg = load_config(path, {
        "NOTIFYD_CHANNELS__OPS_HOOK__TIMEOUT_SEC": "3",  # the file's ops-hook
        "NOTIFYD_CHANNELS__SMS__TYPE": "twilio",  # a new channel, sms
        "NOTIFYD_CHANNELS__SMS__ACCOUNT_SID": SID,
        "NOTIFYD_CHANNELS__SMS__AUTH_TOKEN_FILE": str(secret),
        "NOTIFYD_CHANNELS__SMS__FROM_NUMBER": "+14155550123",
    })
    assert cfg.channels["ops-hook"].timeout_sec == 3.0
    assert cfg.channels["ops-hook"].settings.secret == HOOK_SECRET
    assert cfg.channels["sms"].type == "twilio"
    assert cfg.channels["sms"].settings.auth_token == "twilio-token"
    assert "twilio-token" not in repr(cfg)


def test_a_secret_file_in_the_config_file_is_relative_to_its_folder(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "hook").write_text(HOOK_SECRET + "\n")
    path = config_file(tmp_path, '[channels.hook]\ntype = "webhook"\nurl = "https://h.example"\n'
                                 'secret_file = "secrets/hook"\n')
    assert load_config(path, {}).channels["hook"].settings.secret == HOOK_SECRET
    other = tmp_path / "other"
    other.write_text(HOOK_SECRET[:-2] + "QQ\n")
    env = {"NOTIFYD_CHANNELS__HOOK__SECRET_FILE": str(other)}  # the environment wins
    assert load_config(path, env).channels["hook"].settings.secret == HOOK_SECRET[:-2] + "QQ"
    path.write_text(path.read_text() + f'secret = "{HOOK_SECRET}"\n')
    with pytest.raises(ConfigError, match=r"^channels.hook.secret: set it or secret_file, "
                                          r"not both$"):
        load_config(path, {})


@pytest.mark.parametrize(("env", "message"), [
    ({"NOTIFYD_SERVER_PORT": "80x"}, "NOTIFYD_SERVER_PORT: expected an integer"),
    ({"NOTIFYD_DAEMON_GRACE_SEC": "nan"}, "NOTIFYD_DAEMON_GRACE_SEC: expected a number"),
    ({"NOTIFYD_KINDS__DEMO__BROADCAST": "maybe"},
     "NOTIFYD_KINDS__DEMO__BROADCAST: expected true or false"),
    ({"NOTIFYD_SERVER_PORT": "99999"},
     "server.port: must be 0..65535 (set by NOTIFYD_SERVER_PORT)"),
    ({"NOTIFYD_SERVER_PROT": "1"}, "NOTIFYD_SERVER_PROT: no such key in [server] (known: "),
    ({"NOTIFYD_CHANNELS_SMS_TYPE": "twilio"},
     "NOTIFYD_CHANNELS_SMS_TYPE: an entry of [channels] is set by NOTIFYD_CHANNELS__NAME__KEY"),
    ({"NOTIFYD_CHANNELS__SMS": "twilio"},
     "NOTIFYD_CHANNELS__SMS: expected NOTIFYD_CHANNELS__NAME__KEY"),
    ({"NOTIFYD_KINDS__DEMO__LADDER": "log"},
     "NOTIFYD_KINDS__DEMO__LADDER: kinds.demo.ladder is a list of tables; set it in the config "
     "file"),
    ({"NOTIFYD_CHANNELS__HOOK__TYPE": "webhook", "NOTIFYD_CHANNELS__HOOK__URL": "https://h.example",
      "NOTIFYD_CHANNELS__HOOK__SECRET": "hunter2-not-whsec"},
     "channels.hook.secret: must be whsec_ followed by base64 (at least 16 bytes) (set by "
     "NOTIFYD_CHANNELS__HOOK__SECRET)"),
    ({"NOTIFYD_CHANNELS__HOOK__TYPE": "webhook", "NOTIFYD_CHANNELS__HOOK__SECRET": "a",
      "NOTIFYD_CHANNELS__HOOK__SECRET_FILE": "/dev/null"},
     "NOTIFYD_CHANNELS__HOOK__SECRET_FILE: channels.hook.secret is set by "
     "NOTIFYD_CHANNELS__HOOK__SECRET too; keep one"),
    ({"NOTIFYD_CHANNELS__HOOK__TYPE": "webhook",
      "NOTIFYD_CHANNELS__HOOK__SECRET_FILE": "/no/such/file"},
     "NOTIFYD_CHANNELS__HOOK__SECRET_FILE: no such file: /no/such/file"),
])
def test_a_bad_variable_is_named_and_its_value_is_not_shown(env: dict[str, str],
                                                            message: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(None, env)
    assert str(e.value).startswith(message)
    assert "hunter2" not in str(e.value)


def test_two_entries_that_read_alike_are_refused(tmp_path: Path) -> None:
    path = config_file(tmp_path, '[tenants.a-b]\n[tenants."a.b"]\n')
    with pytest.raises(ConfigError, match=r"^NOTIFYD_TENANTS__A_B__CORS_ORIGINS: a-b and a.b in "
                                          r"\[tenants\] have the same variable name"):
        load_config(path, {"NOTIFYD_TENANTS__A_B__CORS_ORIGINS": "https://x.example"})


def test_the_proxy_variables_fill_the_egress_keys_the_config_leaves_empty(tmp_path: Path) -> None:
    env = {"https_proxy": "http://u:p@lower:3128", "HTTPS_PROXY": "http://upper:3128",
           "HTTP_PROXY": "proxy.internal:8080", "NO_PROXY": "internal.example, 10.0.0.0/8"}
    egress = load_config(None, env).egress
    assert (egress.https_proxy, egress.http_proxy, egress.no_proxy) == (
        "http://u:p@lower:3128", "proxy.internal:8080", ("internal.example", "10.0.0.0/8"))
    routes = egress.routes()
    assert routes.https is not None and (routes.https.host, routes.https.port) == ("lower", 3128)
    assert routes.https.authorization == "Basic " + base64.b64encode(b"u:p").decode()
    assert "u:p" not in repr(routes) and "dTpw" not in repr(routes)
    path = config_file(tmp_path, '[egress]\nhttps_proxy = "http://configured:3128"\n'
                                 'no_proxy = ["*"]\n')
    egress = load_config(path, env).egress  # the config wins, key by key
    assert (egress.https_proxy, egress.http_proxy, egress.no_proxy) == (
        "http://configured:3128", "proxy.internal:8080", ("*",))
    with pytest.raises(ConfigError, match=r"^egress.https_proxy: must be an http:// proxy .*"
                                          r"\(set by HTTPS_PROXY\)$"):
        load_config(None, {"HTTPS_PROXY": "socks5://u:secret@proxy:1080"})

