"""The config: TOML and the environment into frozen dataclasses, one per table, each key declared
once with its type, default, doc and bounds (core/fields.doc), each table's rules across its
keys beside it.

A module per job: the tables (process.py: the process's own; policy.py: channels, kinds and
the other named entries; root.py: the whole config, and the catalog compiled from it), loading
the file and the environment into them (load.py), checking them (check.py: one checker reads
every declaration, then the rules across tables) and writing the commented example that
`notifyd init` and notifyd.example.toml print (example.py), so the code, the checks and the
documentation cannot drift apart (a test holds the example file to it). No channel adapter or
receipt parser is imported: the config reads the types' and providers' declarations.
"""

from __future__ import annotations

from notifyd.config.check import validate
from notifyd.config.example import render_example
from notifyd.config.load import PROXY_VARIABLES, SQLITE_URL, beside, env_table, load_config, moved
from notifyd.config.policy import (
    NAME_RE,
    SEND_SLACK_SEC,
    CategoryConfig,
    ChannelConfig,
    EventTypeConfig,
    KindConfig,
    LimitConfig,
    TenantConfig,
)
from notifyd.config.process import (
    DEFAULT_DB,
    DEFAULT_PORT,
    ConsoleConfig,
    DaemonConfig,
    EgressConfig,
    FanoutConfig,
    RetentionConfig,
    ScannerConfig,
    ServerConfig,
    StoreConfig,
    TemplatesConfig,
    TokensConfig,
)
from notifyd.config.root import Config, compile_catalog
from notifyd.core.catalog import LadderStep

__all__ = [
    "DEFAULT_DB", "DEFAULT_PORT", "NAME_RE", "PROXY_VARIABLES", "SEND_SLACK_SEC", "SQLITE_URL",
    "CategoryConfig", "ChannelConfig", "Config", "ConsoleConfig", "DaemonConfig", "EgressConfig",
    "EventTypeConfig", "FanoutConfig", "KindConfig", "LadderStep", "LimitConfig",
    "RetentionConfig", "ScannerConfig", "ServerConfig", "StoreConfig", "TemplatesConfig",
    "TenantConfig", "TokensConfig", "beside", "compile_catalog", "env_table", "load_config",
    "moved", "render_example", "validate",
]
