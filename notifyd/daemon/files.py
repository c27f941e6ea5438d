"""The daemon's open files, shared out: producers' connections, inbox streams, providers' sockets
and the database each get a part of the process's open-files limit (RLIMIT_NOFILE), so that no
one of them can take the descriptors another needs (a person's pages cannot shut producers out).
"""

from __future__ import annotations

import contextlib
import resource
from dataclasses import dataclass

from notifyd.config import Config

# The database (its file, journal and shared memory for the writer and each reader), the lock
# file, the log, the event loop's own and whatever a library opens.
FD_BASE = 64
STREAMS_DEFAULT = 10_000  # server.max_streams = 0: as many as the files leave, at most this many
FLOOR = 16  # connections (and streams) served however few files there are


@dataclass(frozen=True)
class Budget:
    files: int  # the open-files limit
    providers: int  # sockets the channels may hold at once (their lanes' concurrency)
    connections: int  # server.max_connections, as served
    streams: int  # server.max_streams, as served
    lowered: tuple[str, ...]  # one line per configured value lowered to fit, for the log

    def describe(self) -> str:
        return (f"open files {self.files}: {self.connections} connections, {self.streams} "
                f"inbox streams, {self.providers} provider sockets, {FD_BASE} for the database "
                "and the rest")


def open_files() -> int:
    """The open-files limit, after raising the soft limit to the hard one."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
    return soft


def budget(cfg: Config, files: int) -> Budget:
    """Connections and streams within `files`, after the database and the providers' sockets
    (nothing is accepted beyond the connections: newcomers wait in the kernel). When both do
    not fit, producers' connections keep at least half of what is left (the API must answer
    whatever pages hold open) and streams get the rest; a value the config set that had to be
    lowered is named in `lowered`."""
    srv = cfg.server
    providers = sum(ch.urgent_concurrency + ch.bulk_concurrency for ch in cfg.channels.values())
    room = max(2 * FLOOR, files - FD_BASE - providers)
    streams_wanted = srv.max_streams or STREAMS_DEFAULT
    connections = min(srv.max_connections, max(room // 2, room - streams_wanted))
    streams = min(streams_wanted, room - connections)
    lowered = []
    if connections < srv.max_connections:
        lowered.append(f"server.max_connections {srv.max_connections} is over what {files} "
                       f"open files allow beside the inbox streams, providers and database; "
                       f"serving at most {connections} (raise LimitNOFILE)")
    if srv.max_streams and streams < srv.max_streams:
        lowered.append(f"server.max_streams {srv.max_streams} is over what {files} open files "
                       f"allow beside the connections, providers and database; at most "
                       f"{streams} inbox streams (raise LimitNOFILE)")
    return Budget(files, providers, connections, streams, tuple(lowered))
