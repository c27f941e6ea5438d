"""A SQLite database's own settings ([store.sqlite] in the config), declared as a channel type
declares its keys: every key with its default, its doc and its bounds."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.fields import Checked, doc

SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")


@dataclass(frozen=True)
class SqliteSettings(Checked):
    synchronous: str = doc("FULL survives power loss; NORMAL only a process crash. FULL, NORMAL "
                           "or EXTRA.", "FULL", choices=SYNCHRONOUS)
    busy_timeout_ms: int = doc("How long a write waits for another process's write lock.", 5000,
                               ge=0)
    check_at_start: bool = doc("Check the database for damage (PRAGMA quick_check) before "
                               "serving; a damaged file stops the start, naming it.", True)
