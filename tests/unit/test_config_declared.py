"""The config's tables as declared: each key's bounds beside it, one checker reading them, and
the channel types and receipt providers read from their declarations, so that importing the
config loads no adapter, parser, aiohttp or cryptography."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.channels.base import Adapter
from notifyd.config import load_config, process, render_example, root
from notifyd.config import policy as policy_tables
from notifyd.core.errors import ConfigError
from notifyd.core.fields import Bounds, Checked
from notifyd.receipts import PROVIDERS

ROOT = Path(__file__).resolve().parents[2]
ADAPTERS = sorted({t.build.module for t in CHANNEL_TYPES.values() if isinstance(t.build, Adapter)})
PARSERS = sorted({p.adapter for p in PROVIDERS.values()})
LIBRARIES = ("aiohttp", "cryptography", "http_ece", "py_vapid", "aiosmtplib", "httptools")


def loaded_after(script: str) -> dict[str, list[str]]:
    """The modules a fresh interpreter holds after each step of `script`, whose lines
    `mark("name")` record sys.modules at that point."""
    program = ("import json, sys\nseen = {}\n"
               "def mark(name):\n    seen[name] = sorted(sys.modules)\n"
               f"{script}\nprint(json.dumps(seen))\n")
    result = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True,
                            text=True, check=True)
    seen: dict[str, list[str]] = json.loads(result.stdout)
    return seen


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m in ADAPTERS or m in PARSERS
            or m.split(".")[0] in LIBRARIES]


def test_the_registries_name_every_adapter_and_parser_module() -> None:
    assert len(ADAPTERS) == len(CHANNEL_TYPES) and len(PARSERS) == len(PROVIDERS)
    assert "notifyd.channels.smtp" in ADAPTERS and "notifyd.receipts.ses" in PARSERS


def test_importing_and_loading_the_config_loads_no_adapter_parser_aiohttp_or_cryptography(
        tmp_path: Path) -> None:
    config = tmp_path / "n.toml"
    config.write_text('[channels.hook]\ntype = "webhook"\nurl = "https://h.example/x"\n'
                      '[channels.sms]\ntype = "twilio"\naccount_sid = "AC' + "0" * 32 + '"\n'
                      'auth_token = "t"\nfrom_number = "+14155550123"\n'
                      '[webhooks.twilio]\nauth_token = "t0k3n"\n'
                      '[kinds.k]\nladder = [{ channel = "sms" }]\n')
    seen = loaded_after("import notifyd.config\nmark('import')\n"
                        "from notifyd.config import load_config\n"
                        f"cfg = load_config({str(config)!r}, {{}})\ncfg.catalog\n"
                        "mark('load')\n")
    assert "notifyd.config" in seen["import"] and "notifyd.channels.types.smtp" in seen["import"]
    assert heavy(seen["import"]) == []
    assert heavy(seen["load"]) == []  # channels configured, their declarations only


def test_an_adapter_and_a_parser_are_imported_when_first_used() -> None:
    seen = loaded_after(
        "from notifyd.channels import build_channel\n"
        "from notifyd.channels.base import Limits\n"
        "from notifyd.channels.types.log import LogSettings\n"
        "from notifyd.receipts import PROVIDERS\nmark('before')\n"
        "build_channel('log', 'log', LogSettings(), Limits(1.0, 1))\nmark('built')\n"
        "PROVIDERS['mailgun'].nonce\nmark('receipts')\n")
    assert heavy(seen["before"]) == []
    assert "notifyd.channels.log" in seen["built"] and "notifyd.channels.smtp" not in seen["built"]
    assert "notifyd.receipts.mailgun" in seen["receipts"]
    assert "notifyd.receipts.ses" not in seen["receipts"]


def test_a_declared_provider_hands_out_its_parsers_own_functions() -> None:
    from notifyd.receipts import mailgun, ses

    assert PROVIDERS["mailgun"].parse is mailgun.parse and PROVIDERS["mailgun"].nonce is mailgun.nonce
    assert PROVIDERS["ses"].nonce is None and PROVIDERS["ses"] is ses.PROVIDER


def test_every_smtp_relay_has_its_metadata_header() -> None:
    from notifyd.channels.smtp import RELAY_HEADER
    from notifyd.channels.types.smtp import RELAYS

    assert tuple(RELAY_HEADER) == RELAYS


# --- the tables as declared ------------------------------------------------------------------


def tables() -> list[type[Any]]:
    """Every table of the config and of the channel types and providers it reads."""
    own = [obj for module in (process, policy_tables, root) for obj in vars(module).values()
           if isinstance(obj, type) and dataclasses.is_dataclass(obj)
           and obj.__module__ == module.__name__]
    return own + [t.settings for t in CHANNEL_TYPES.values()] + [
        p.settings for p in PROVIDERS.values()]


def test_every_table_is_checked_and_every_key_documented() -> None:
    assert len(tables()) > 30
    unchecked = [cls.__name__ for cls in tables() if cls is not root.Config
                 and not issubclass(cls, Checked)]
    assert unchecked == []
    undocumented = [f"{cls.__name__}.{f.name}" for cls in tables()
                    for f in dataclasses.fields(cls) if not f.metadata.get("doc")
                    and not f.metadata.get("type_settings")]
    assert undocumented == []


def test_the_example_shows_every_key_of_the_configs_own_tables() -> None:
    text = render_example()
    for cls in tables()[:-len(CHANNEL_TYPES) - len(PROVIDERS)]:
        if cls is root.Config:
            continue
        for f in dataclasses.fields(cls):
            if f.metadata.get("type_settings") or dataclasses.is_dataclass(f.default_factory):
                continue
            assert re.search(rf"\n(# )?{f.name} = ", text), f"{cls.__name__}.{f.name} missing"


@pytest.mark.parametrize(("bounds", "value", "message"), [
    (Bounds(ge=0, le=65535), 70000, "must be 0..65535"),
    (Bounds(ge=0, le=65535), -1, "must be 0..65535"),
    (Bounds(gt=0, le=1), 0.0, "must be in (0, 1]"),
    (Bounds(ge=0.2, le=3600), 0.1, "must be 0.2..3600"),
    (Bounds(ge=1), 0, "must be >= 1"),
    (Bounds(gt=0), 0.0, "must be > 0"),
    (Bounds(ge=0, note="0: off"), -1, "must be >= 0 (0: off)"),
    (Bounds(ge=1024, says="must be at least 1024"), 10, "must be at least 1024"),
    (Bounds(choices=("a", "b")), "c", "must be one of a, b"),
    (Bounds(choices=("", "a", "b")), "c", "must be one of a, b, or empty"),
    (Bounds(nonempty=True), "", "must not be empty"),
    (Bounds(nonempty=True, says="needs at least one step"), (), "needs at least one step"),
    (Bounds(pattern=re.compile("[a-z]+"), says="{value!r} is wrong"), "abc1", "'abc1' is wrong"),
    (Bounds(pattern=re.compile("[a-z]+"), says="entry {entry} is wrong"), ("a", "1"),
     "entry 2 is wrong"),
    (Bounds(pattern=re.compile("[a-z]+"), says="no"), ("a", ""), "no"),  # an empty entry
    (Bounds(pattern=re.compile("[a-z]+$"), says="no"), "abc\n", "no"),  # matched whole
    (Bounds(min_length=12), "short", "must be at least 12 characters"),
    (Bounds(check=lambda v: "odd" if v % 2 else None), 3, "odd"),
])
def test_a_bound_says_what_is_allowed(bounds: Bounds, value: Any, message: str) -> None:
    assert bounds.problem(value) == message


@pytest.mark.parametrize(("bounds", "value"), [
    (Bounds(ge=0, le=10), None),  # an optional key unset
    (Bounds(ge=1), True),  # a bool is not a number here: its type was checked on loading
    (Bounds(pattern=re.compile("[a-z]+")), ""),  # empty text: nonempty's business
    (Bounds(min_length=12), ""),
    (Bounds(pattern=re.compile("[a-z]+")), ()),
    (Bounds(gt=0, le=1), 1.0),
    (Bounds(choices=("", "a")), ""),
])
def test_a_bound_lets_what_it_allows_through(bounds: Bounds, value: Any) -> None:
    assert bounds.problem(value) is None


@pytest.mark.parametrize(("toml", "env", "message"), [
    ("[server]\nmax_batch_body_bytes = 10\n", {}, "server.max_batch_body_bytes: must be at least "
                                                 "1024"),
    ("[retention]\ninbox_sec = -1\n", {}, "retention.inbox_sec: must be 0..31536000 (a year; 0 "
                                          "keeps them forever)"),
    ("", {"NOTIFYD_RETENTION_BATCH": "0"}, "retention.batch: must be 1..10000 (set by "
                                           "NOTIFYD_RETENTION_BATCH)"),
    ("[channels.c]\nbroadcast_share = 1.5\n", {}, "channels.c.broadcast_share: must be in (0, 1]"),
    ("[channels.c]\nmax_attempts = -1\n", {}, "channels.c.max_attempts: must be >= 0 (0: no count "
                                              "limit, the time to live bounds the retries)"),
    ("[channels.c]\nmedium = \"fax\"\n", {}, "channels.c.medium: must be one of email, sms, push, "
                                             "chat, or empty"),
    ("[console]\npassword = \"hunter2\"\n", {}, "console.password: must be at least 12 characters "
                                                "(or empty: admin API keys only)"),
    ("[tenants.a]\ncors_origins = [\"https://a.example/path\"]\n", {},
     "tenants.a.cors_origins: 'https://a.example/path' is not an origin"),
    ("[kinds.k]\nladder = [{ channel = \"log\", after_sec = -1 }]\n", {},
     "kinds.k.ladder[0].after_sec: must be 0..31536000"),
    ("[limits]\n", {}, "limits: expected an array"),
    ("[[limits]]\nmedium = \"fax\"\n", {}, "limits[0].medium: must be one of email, sms, push, "
                                           "chat, or empty"),
    ("[webhooks.ses]\ntopic_arns = [\"arn:aws:sns:us-east-1:123456789012:t\", \"nope\"]\n", {},
     "webhooks.ses.topic_arns: entry 2 is not an SNS topic ARN"),
    ("[webhooks.mailgun]\ntolerance_sec = 0\n", {}, "webhooks.mailgun.tolerance_sec: must be "
                                                    "between 1 and 86400"),
    ("[channels.c]\ntype = \"log\"\nbackoff_base_sec = 9.0\nbackoff_max_sec = 1.0\n", {},
     "channels.c.backoff_base_sec: must not be over backoff_max_sec"),
])
def test_a_bad_key_is_named_with_its_declared_bound(tmp_path: Path, toml: str,
                                                    env: dict[str, str], message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as e:
        load_config(path, env)
    assert str(e.value).startswith(message), str(e.value)
