"""The config: example file, `notifyd init` and the dataclasses in step; errors name the key."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from click.testing import CliRunner

from notifyd import config as config_module
from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.cli import main
from notifyd.config import (
    CategoryConfig,
    ChannelConfig,
    Config,
    EventTypeConfig,
    KindConfig,
    LadderStep,
    LimitConfig,
    TenantConfig,
    load_config,
    render_example,
    validate,
)
from notifyd.core.errors import ConfigError
from notifyd.receipts import PROVIDERS
from notifyd.store.sqlite.settings import SqliteSettings

EXAMPLE = Path(__file__).resolve().parents[2] / "notifyd.example.toml"


def test_example_file_is_the_rendered_example() -> None:
    assert EXAMPLE.read_text() == render_example(), (
        "notifyd.example.toml is stale; regenerate it: python -c 'from notifyd.config import "
        "render_example; print(render_example(), end=\"\")' > notifyd.example.toml")


def test_example_file_loads_to_the_defaults() -> None:
    # ... with the store url relative to the file's folder, as any relative path in a file is
    defaults = Config()
    beside_it = dataclasses.replace(defaults.store, url=str(EXAMPLE.parent / "notifyd.db"))
    templates = dataclasses.replace(defaults.templates, folder=str(EXAMPLE.parent / "templates"))
    assert load_config(EXAMPLE) == dataclasses.replace(defaults, store=beside_it,
                                                       templates=templates)


def test_a_relative_store_url_is_relative_to_the_config_files_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "srv").mkdir()
    config = tmp_path / "srv" / "n.toml"
    config.write_text('[store]\nurl = "data/n.db"\n')
    monkeypatch.chdir(tmp_path)  # a command run from elsewhere finds the same database
    assert load_config("srv/n.toml").store.url == str(tmp_path / "srv" / "data" / "n.db")
    config.write_text('[store]\nurl = "sqlite:///n.db"\n')
    assert load_config(config).store.url == f"sqlite:///{tmp_path / 'srv' / 'n.db'}"
    config.write_text('[store]\nurl = "/var/lib/notifyd/n.db"\n')
    assert load_config(config).store.url == "/var/lib/notifyd/n.db"


def test_the_keys_that_moved_keep_working_where_they_were(tmp_path: Path) -> None:
    config = tmp_path / "n.toml"
    config.write_text('[store]\npath = "old.db"\nsynchronous = "NORMAL"\n'
                      'busy_timeout_ms = 100\ncheck_at_start = false\n')
    cfg = load_config(config)
    assert cfg.store.url == str(tmp_path / "old.db")
    assert (cfg.store.sqlite.synchronous, cfg.store.sqlite.busy_timeout_ms,
            cfg.store.sqlite.check_at_start) == ("NORMAL", 100, False)
    config.write_text('[store]\npath = "old.db"\nurl = "new.db"\n')
    with pytest.raises(ConfigError, match="store.path: the old name of store.url, which is "
                                          "set too; keep only store.url"):
        load_config(config)
    config.write_text('[store]\nsynchronous = "FULL"\n[store.sqlite]\nsynchronous = "NORMAL"\n')
    with pytest.raises(ConfigError, match="keep only store.sqlite.synchronous"):
        load_config(config)
    # /readyz's bound is on the daemon's own lag now; a config with the old name still loads
    config.write_text('[daemon]\nready_max_due_lag_sec = 30\n')
    assert load_config(config).daemon.ready_max_loop_lag_sec == 30
    config.write_text('[daemon]\nready_max_due_lag_sec = 30\nready_max_loop_lag_sec = 2\n')
    with pytest.raises(ConfigError, match="daemon.ready_max_due_lag_sec: the old name of "
                                          "daemon.ready_max_loop_lag_sec"):
        load_config(config)


def test_the_log_channel_is_always_there_and_demo_only_without_kinds(tmp_path: Path) -> None:
    config = tmp_path / "n.toml"
    config.write_text('[channels.hook]\ntype = "webhook"\nurl = "https://x/h"\n')
    cfg = load_config(config)  # no kinds: the demo kind, on the built-in log channel
    assert set(cfg.channels) == {"hook", "log"} and set(cfg.kinds) == {"demo"}
    config.write_text('[channels.hook]\ntype = "webhook"\nurl = "https://x/h"\n'
                      '[kinds.k]\nladder = [{ channel = "hook", timeout_sec = 60 }, { channel = "log" }]\n')
    cfg = load_config(config)
    assert set(cfg.channels) == {"hook", "log"} and set(cfg.kinds) == {"k"}


def _config_dataclasses() -> list[type]:
    """The config's tables, from every module of the package that declares them, and a SQLite
    database's ([store.sqlite])."""
    modules = [importlib.import_module(f"notifyd.config.{m.name}")
               for m in pkgutil.iter_modules(config_module.__path__)]
    found = [obj for mod in modules for obj in vars(mod).values()
             if isinstance(obj, type) and dataclasses.is_dataclass(obj)
             and obj.__module__ == mod.__name__]
    assert len(found) > 10, found  # the tables, not a stray class or two
    return found + [SqliteSettings]


def _keys(cls: type) -> list[dataclasses.Field[object]]:
    """The TOML keys a config dataclass has (a channel's type settings are keys of their own,
    and a nested table, such as [store.sqlite], is a table of its own)."""
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("type_settings")
            and not dataclasses.is_dataclass(f.default_factory)]


def test_every_config_field_has_a_doc() -> None:
    classes = _config_dataclasses() + [t.settings for t in CHANNEL_TYPES.values()]
    undocumented = [f"{cls.__name__}.{f.name}" for cls in classes for f in _keys(cls)
                    if not f.metadata.get("doc")]
    assert undocumented == []


def test_example_documents_each_channel_types_own_keys() -> None:
    text = render_example()
    for name, ctype in CHANNEL_TYPES.items():
        assert f'#   type = "{name}": ' in text
        for f in _keys(ctype.settings):
            assert f"\n#     {f.name} = " in text, f"{name}.{f.name} missing from the example"


def test_example_documents_each_webhook_providers_keys() -> None:
    text = render_example()
    for name, provider in PROVIDERS.items():
        assert f"# [webhooks.{name}]  {provider.summary}" in text
        for f in dataclasses.fields(provider.settings):
            assert f.metadata.get("doc"), f"webhooks.{name}.{f.name} has no doc"
            if isinstance(getattr(provider.settings(), f.name), dict):  # a table of named ones
                assert f"# [webhooks.{name}.{f.name}.NAME]  {f.metadata['doc']}" in text
                continue
            assert f"\n#   {f.name} = " in text, f"webhooks.{name}.{f.name} missing"


def test_webhook_tables_are_checked_against_their_provider(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[webhooks.twillio]\nauth_token = "x"\n')
    with pytest.raises(ConfigError, match=r"webhooks.twillio: unknown provider \(known: "):
        load_config(path)
    path.write_text('[webhooks.twilio]\nsecret = "x"\n')
    with pytest.raises(ConfigError, match=r"webhooks.twilio.secret: unknown key \(known: "
                                          r"auth_token\)"):
        load_config(path)
    path.write_text('[webhooks.resend]\nsecret = "not-a-whsec-Zm9vYmFy"\n')
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "webhooks.resend.secret: must be whsec_" in str(e.value)
    assert "Zm9vYmFy" not in str(e.value)  # a secret in the wrong shape is not echoed
    path.write_text('[webhooks.twilio]\nauth_token = "0123456789abcdef"\n[webhooks.resend]\n')
    cfg = load_config(path)
    assert cfg.webhook("twilio") is not None and cfg.webhook("resend") is None
    assert cfg.webhook("ses") is None


def test_a_channel_types_own_keys_are_checked_against_its_type(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[channels.log]\nurl = "http://x"\n')  # url is the webhook's key
    with pytest.raises(ConfigError, match=r"channels.log.url: unknown key for a log channel"):
        load_config(path)
    path.write_text('[channels.h]\ntype = "webhook"\nurl = "ftp://x"\n')
    with pytest.raises(ConfigError, match=r"channels.h.url: a webhook channel needs an http"):
        load_config(path)
    path.write_text('[channels.h]\ntype = "webhook"\nurl = "http://x/hook"\nrate_per_sec = 5\n'
                    '[kinds.k]\nladder = [{ channel = "h" }]\n')
    ch = load_config(path).channels["h"]
    assert (ch.settings.url, ch.rate_per_sec) == ("http://x/hook", 5.0)


def test_example_shows_every_key() -> None:
    # Each documented field shows up as a key line in the example, so the example documents it;
    # a channel's and a kind's keys in comments, as those tables have no defaults to show.
    text = render_example()
    for cls in _config_dataclasses():
        if cls in (Config, LadderStep):
            continue
        lead = "# " if cls in (ChannelConfig, KindConfig, CategoryConfig, LimitConfig,
                               TenantConfig, EventTypeConfig) else ""
        for f in _keys(cls):
            assert f"\n{lead}{f.name} = " in text, f"{cls.__name__}.{f.name} missing"


@pytest.mark.parametrize(("toml", "key"), [
    ("[server]\nbogus = 1\n", "server.bogus"),
    ("[sever]\nport = 1\n", "sever"),
    ("[server]\nport = \"80\"\n", "server.port"),
    ("[server]\nport = true\n", "server.port"),
    ("[store]\nsynchronous = \"OFF\"\n", "store.sqlite.synchronous"),
    ("[kinds.k]\nladder = [{ channel = \"pager\" }]\n", "kinds.k.ladder[0].channel"),
    ("[kinds.k]\nladder = [{ channel = \"log\" }, { channel = \"log\" }]\n", "kinds.k.ladder[1]"),
    ("[kinds.k]\nladder = [{ channel = \"log\", colour = 1 }]\n", "kinds.k.ladder[0].colour"),
    ("[channels.log]\ntimeout_sec = \"soon\"\n", "channels.log.timeout_sec"),
])
def test_invalid_config_names_the_key(tmp_path: Path, toml: str, key: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(err.value).startswith(f"{key}:"), str(err.value)


def test_validate_rejects_a_step_with_no_time() -> None:
    kind = KindConfig(ladder=(LadderStep("log"), LadderStep("log")))
    with pytest.raises(ConfigError, match=r"^kinds\.k\.ladder\[1\]: needs after_sec"):
        validate(Config(kinds={"k": kind}))


def test_a_step_may_use_after_sec_instead() -> None:
    kind = KindConfig(ladder=(LadderStep("log"), LadderStep("log", after_sec=60)))
    assert validate(Config(kinds={"k": kind})).kinds["k"] == kind


def test_serve_with_an_invalid_config_fails_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[store]\nsynchronous = \"OFF\"\n")
    result = CliRunner().invoke(main, ["--config", str(path), "serve"])
    assert result.exit_code != 0
    assert "store.sqlite.synchronous" in result.output


def test_the_commented_example_at_the_end_is_a_valid_config(tmp_path: Path) -> None:
    text = render_example()
    tail = text[text.index("# [channels.ops-hook]"):]
    uncommented = "\n".join(line[2:] if line.startswith("# ") else "" for line in tail.splitlines())
    path = tmp_path / "example.toml"
    path.write_text(uncommented + '\n[channels.log]\ntype = "log"\n')
    cfg = load_config(path)
    assert cfg.kinds["server_down"].ladder[0].channel == "ops-hook"


def test_every_secret_setting_stays_out_of_reprs() -> None:
    """A config printed in a log line, an error or a traceback never shows a secret: each key
    whose doc calls it a secret (or whose name says so) is declared with fields.sensitive."""
    tables = [t.settings for t in CHANNEL_TYPES.values()] + [
        p.settings for p in PROVIDERS.values()]
    for cls in tables:
        for f in dataclasses.fields(cls):
            if f.type not in ("str", str) or f.name in (
                    "service_account_file", "header_name", "username", "api_key_sid", "token_url"):
                continue  # a path, a name, a duration: not secrets themselves
            looks_secret = "secret" in f.metadata.get("doc", "").lower() or any(
                w in f.name for w in ("password", "token", "secret", "signing_key", "api_key"))
            if looks_secret:
                assert f.metadata.get("secret") and not f.repr, f"{cls.__name__}.{f.name}"
                shown = repr(cls(**{f.name: "hunter2-s3cr3t"}))
                assert "hunter2" not in shown, f"{cls.__name__}.{f.name}"


@pytest.mark.parametrize(("events", "fanout", "message"), [
    ({"news": {"kinds": []}}, {}, "events.news.kinds: needs at least one kind"),
    ({"news": {"kinds": ["nope"]}}, {}, "events.news.kinds: unknown kind 'nope'"),
    ({"news": {"kinds": ["a", "a"]}}, {}, "events.news.kinds: names a kind twice"),
    ({"news": {"kinds": ["d"]}}, {}, "events.news.kinds: 'd' is a digest kind"),
    ({"News": {"kinds": ["a"]}}, {}, "events.News: names are lower-case"),
    ({}, {"chunk": 0}, "fanout.chunk: must be 1..10000"),
    ({}, {"max_inline_users": 0}, "fanout.max_inline_users: must be 1..10000"),
    ({"news": {"kind": ["a"]}}, {}, r"events.news.kind: unknown key \(known: kinds\)"),
])
def test_event_types_and_the_fanout_are_checked(tmp_path: Path, events: dict[str, Any],
                                                fanout: dict[str, Any], message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(tomli_w.dumps({
        "kinds": {"a": {"ladder": [{"channel": "log"}]},
                  "d": {"schedule": "hourly", "ladder": [{"channel": "log"}]}},
        "events": events, "fanout": fanout}))
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_an_event_type_lists_its_kinds(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[kinds.a]\nladder = [{ channel = "log" }]\n[events.news]\nkinds = ["a"]\n')
    assert load_config(path).events["news"].kinds == ("a",)
