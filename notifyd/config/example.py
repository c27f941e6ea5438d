"""The commented config that `notifyd init` writes and notifyd.example.toml is: every key of
every table, documented from its declaration, each with its default; channels, kinds and the
other tables of named entries, which have no defaults to show, in comments."""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

import tomli_w

from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.config.policy import (
    CategoryConfig,
    ChannelConfig,
    EventTypeConfig,
    KindConfig,
    LimitConfig,
    TenantConfig,
)
from notifyd.config.root import Config
from notifyd.core.catalog import LadderStep
from notifyd.receipts import PROVIDERS


def render_example() -> str:
    """The commented config for `notifyd init` and notifyd.example.toml: every key, documented,
    each with its default; channels and kinds, which have no defaults to show, in comments."""
    cfg = Config()
    out = ["# notifyd configuration. Every key is optional; each shows its default. Durations are",
           "# in seconds; a relative store.url is relative to this file's folder.",
           "# Start with: notifyd --config notifyd.toml serve",
           "#",
           "# An environment variable sets any key that is not a list of tables, and wins over",
           "# this file: NOTIFYD_<TABLE>_<KEY> (NOTIFYD_SERVER_PORT=8080,",
           "# NOTIFYD_STORE_SQLITE_SYNCHRONOUS=NORMAL), and for an entry of a table of named",
           "# entries NOTIFYD_<TABLE>__<NAME>__<KEY> (NOTIFYD_CHANNELS__SMS__AUTH_TOKEN). A",
           "# secret may be read from a file instead: KEY_file = \"path\" here (relative to this",
           "# file's folder), NOTIFYD_..._KEY_FILE=path in the environment. A reload (SIGHUP)",
           "# reads the files again; the environment stays what the process started with.", ""]
    for f in dataclasses.fields(Config):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            out += _render_table(f.name, f.metadata["doc"], value)
    out += [
        "# Channels by name; ladders refer to these names. A channel named \"log\" (type log)",
        "# always exists unless you define one of that name. A channel table takes these keys:",
        "#",
        "# [channels.NAME]",
        *_commented(_render_fields(ChannelConfig())),
        "",
        *_render_channel_types(),
        "# Notification kinds by name: each its ladder and policy. With no [kinds] table a",
        "# built-in kind \"demo\" sends on the log channel at once and again 30 seconds later,",
        "# unless resolved first. A kind table takes these keys:",
        "#",
        "# [kinds.NAME]",
        *_commented(_render_fields(KindConfig(ladder=(LadderStep("log"),)))),
        "",
        "# Preference categories by name (a kind's `category`, else its name). A category not",
        "# listed is optional with every medium on. A category table takes these keys:",
        "#",
        "# [categories.NAME]",
        *_commented(_render_fields(CategoryConfig())),
        "",
        "# Send limits per person, as many as you like; an item over one is held for its kind's",
        "# digest (or suppressed, rate_limited, when the kind has none). Each takes these keys:",
        "#",
        "# [[limits]]",
        *_commented(_render_fields(LimitConfig())),
        "",
        "# Per-tenant settings:",
        "#",
        "# [tenants.NAME]",
        *_commented(_render_fields(TenantConfig())),
        "",
        "# Event types by name, for POST /v1/events: an event of a type reaches its audience",
        "# (a list of users, a topic, or everyone) as one notification of each of its kinds per",
        "# recipient. An event type table takes these keys:",
        "#",
        "# [events.NAME]",
        *_commented(_render_fields(EventTypeConfig(kinds=("comment_reply",)))),
        "",
        *_render_webhooks(),
        "# For example, a webhook channel and a kind that escalates from it to the log after ten",
        "# minutes unless resolved first:",
        "#",
        "# [channels.ops-hook]",
        "# type = \"webhook\"",
        "# url = \"https://hooks.example.com/notify\"",
        "#",
        "# [kinds.server_down]",
        "# urgency = \"urgent\"",
        "# ttl_sec = 7200",
        "# ladder = [",
        "#   { channel = \"ops-hook\", timeout_sec = 600 },",
        "#   { channel = \"log\" },",
        "# ]",
        "",
    ]
    return "\n".join(out)


def _commented(lines: list[str]) -> list[str]:
    """Doc lines (already '# ...') as '# # ...', keys as '# key = ...'."""
    return [f"# {part}" for line in lines for part in line.split("\n")]


def _render_channel_types() -> list[str]:
    """Each channel type's own keys, which go in a [channels.NAME] table beside `type`."""
    out = ["# Each channel type adds keys of its own to its [channels.NAME] table:"]
    for name, ctype in CHANNEL_TYPES.items():
        out.append(f"#   type = \"{name}\": {ctype.summary}")
        for line in _render_fields(ctype.settings()):
            out += [f"#     {part.removeprefix('# ')}" for part in line.split("\n")]
    return [*out, ""]


def _render_webhooks() -> list[str]:
    """Each provider's delivery webhook: POST /v1/webhooks/NAME, on when its secret is set."""
    out = ["# Delivery receipts from providers' webhooks: each provider's table turns on",
           "# POST /v1/webhooks/NAME once its secret is set. Point the provider at",
           "# server.public_url + /v1/webhooks/NAME. Providers and their keys:", "#"]
    for name, provider in PROVIDERS.items():
        out.append(f"# [webhooks.{name}]  {provider.summary}")
        for line in _render_fields(provider.settings()):
            out += [f"#   {part.removeprefix('# ')}" for part in line.split("\n")]
        for table, text, entry in _named_tables(provider.settings):
            out.append(f"# [webhooks.{name}.{table}.NAME]  {text}")
            for line in _render_fields(entry()):
                out += [f"#   {part.removeprefix('# ')}" for part in line.split("\n")]
    return [*out, ""]


def _named_tables(cls: type[Any]) -> list[tuple[str, str, type[Any]]]:
    """A settings class's tables of named entries (dict[str, a dataclass]): key, doc, entry
    class."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        args = typing.get_args(hints[f.name]) if typing.get_origin(hints[f.name]) is dict else ()
        if len(args) == 2 and isinstance(args[1], type) and dataclasses.is_dataclass(args[1]):
            out.append((f.name, str(f.metadata["doc"]), args[1]))
    return out


def _render_table(name: str, text: str, obj: Any) -> list[str]:
    """[name] with its keys, then each table nested in it ([store.sqlite])."""
    out = [f"# {text}", f"[{name}]", *_render_fields(obj), ""]
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out += _render_table(f"{name}.{f.name}", f.metadata["doc"], value)
    return out


def _render_fields(obj: Any) -> list[str]:
    lines = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if "doc" not in f.metadata or dataclasses.is_dataclass(value) or isinstance(value, dict):
            continue  # tables: _render_table; tables of named entries: their own comment
        if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
            tables = [{k: v for k, v in dataclasses.asdict(s).items() if v is not None}
                      for s in value]
            body = f"{f.name} = [\n" + "".join(
                f"  {_inline(table)},\n" for table in tables) + "]"
        else:
            body = tomli_w.dumps({f.name: list(value) if isinstance(value, tuple) else value})
            body = body.strip()
        secret = f" Or {f.name}_file: the path of a file that holds it." \
            if f.metadata.get("secret") else ""
        lines += [f"# {f.metadata['doc']}{secret}", body]
    return lines


def _inline(table: dict[str, Any]) -> str:
    return "{ " + ", ".join(tomli_w.dumps({k: v}).strip() for k, v in table.items()) + " }"
