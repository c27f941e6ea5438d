"""A SQLite database's own settings ([store.sqlite] in the config), declared as a channel type
declares its keys: every key with its default and its doc, checked by problems()."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.fields import doc

SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")


@dataclass(frozen=True)
class SqliteSettings:
    synchronous: str = doc("FULL survives power loss; NORMAL only a process crash. FULL, NORMAL "
                           "or EXTRA.", "FULL")
    busy_timeout_ms: int = doc("How long a write waits for another process's write lock.", 5000)
    check_at_start: bool = doc("Check the database for damage (PRAGMA quick_check) before "
                               "serving; a damaged file stops the start, naming it.", True)

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if self.synchronous not in SYNCHRONOUS:
            out.append(("synchronous", f"must be one of {', '.join(SYNCHRONOUS)}"))
        if self.busy_timeout_ms < 0:
            out.append(("busy_timeout_ms", "must be >= 0"))
        return out
