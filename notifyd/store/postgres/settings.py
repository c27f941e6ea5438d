"""A PostgreSQL database's own settings ([store.postgres] in the config), declared as a channel
type declares its keys: every key with its default, its doc and its bounds."""

from __future__ import annotations

from dataclasses import dataclass

from notifyd.core.fields import Checked, doc


@dataclass(frozen=True)
class PostgresSettings(Checked):
    pool_size: int = doc(
        "Connections this process reads on, each on a thread of its own, so that that many "
        "requests' reads go on at once. Beside them a process holds two more: the writer's "
        "(every write goes through it, in group commits) and the listener's (signals from the "
        "other processes). Two readers keep a request's read from "
        "waiting behind another's without holding many idle connections; keep "
        "(pool_size + 2) x the processes, and the tools beside them, under the server's "
        "max_connections.", 2, ge=1, le=64)
    statement_timeout_ms: int = doc(
        "A statement running longer is cancelled by the server (its statement_timeout): a "
        "read answers 503 storage_unavailable, a write fails its batch as an outage would (the "
        "accepts in it get 503, and their producers retry with the same dedup key). "
        "notifyd's own statements take milliseconds; the default, 15 s, ends only a stuck "
        "one, well before a claimed step's lease (scanner.lease_sec) runs out. 0: no limit.",
        15_000, ge=0)
