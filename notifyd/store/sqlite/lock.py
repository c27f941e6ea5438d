"""One daemon per SQLite file: a second would share its in-flight sends' leases and time them
out. The lock is a file beside the database (`<db>.lock`) held with flock; the kernel drops it
when the process dies."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from notifyd.store.base import StoreLocked, StoreUnavailable


class FileLock:
    """The held lock; `release()` lets it go, removing the file if this lock made it and the
    daemon never started (a failed start leaves nothing behind)."""

    def __init__(self, db_path: str) -> None:
        folder = Path(db_path).resolve().parent
        if not folder.is_dir():
            raise StoreUnavailable(f"the database folder {folder} does not exist; create it, or "
                                   "point store.url (or --db) elsewhere")
        # Named after the real path, so a symlink to the same file finds the same lock.
        self.path = f"{os.path.realpath(db_path)}.lock"
        self.created = not os.path.exists(self.path)
        try:  # never through a symlink planted there, never truncating what is there
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as e:
            raise StoreUnavailable(f"cannot open the lock file {self.path}: {e.strerror}"
                                   ) from None
        self._handle = os.fdopen(fd, "r+")
        try:
            fcntl.flock(self._handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._handle.close()
            raise StoreLocked(f"another notifyd serve is running on {db_path}") from None

    def release(self, undo: bool = False) -> None:
        """Let the lock go; with `undo`, also remove the lock file if this lock created it."""
        self._handle.close()
        if undo and self.created:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
