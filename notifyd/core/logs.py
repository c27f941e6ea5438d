"""Log lines a person can act on, and that input cannot flood or forge.

Every line is one line: control characters from input (a user id with a newline) are escaped.

`RateLimit` lets one line through per interval and counts what it held back; `Throttled` logs
through one per kind of line, and reports an unexpected exception in one line, not a traceback;
`Outage` says once that a loop waits for the storage, and once that it goes on.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
import traceback
from datetime import UTC, datetime
from types import FrameType
from typing import Any

from notifyd.core.clock import Clock

_UNPRINTABLE = re.compile(r"[^\x20-\x7e]")


def printable(text: object, limit: int = 160) -> str:
    """`text` with control and non-ASCII characters escaped, cut to `limit`: safe in one line."""
    out = _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode(), str(text))
    return out if len(out) <= limit else out[:limit] + "..."


class RateLimit:
    """At most one event per `every_ms` on the clock; `allow()` says how many it held back."""

    def __init__(self, clock: Clock, every_ms: int) -> None:
        self.clock, self.every_ms = clock, every_ms
        self.last: int | None = None
        self.held = 0

    def allow(self) -> int | None:
        """None: hold this one back. Else the number held back since the last one let through."""
        now = self.clock.now_ms()
        if self.last is not None and self.last <= now < self.last + self.every_ms:
            self.held += 1
            return None
        self.last, held, self.held = now, self.held, 0
        return held


class Outage:
    """A loop that waits for the storage and tries again (the database unreachable, a full
    disk): one line when it starts waiting, one when a try succeeds again; the tries between
    say nothing (the store's own line says how the storage fails, once per 10 s)."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self.logger, self.what = logger, what
        self.waiting = False

    def waits(self, why: object) -> None:
        if not self.waiting:
            self.waiting = True
            self.logger.warning("%s waits for the storage: %s", self.what, printable(why, 400))

    def goes_on(self) -> None:
        if self.waiting:
            self.waiting = False
            self.logger.info("%s goes on: the storage answers again", self.what)


THROTTLE_MS = 10_000


class Throttled:
    """Lines a client can cause at will (a refused webhook, an error it provokes): at most one per
    `every_ms` of each kind, `key`, which the caller bounds (a provider's name, not input); each
    line says how many of its kind were held back since the one before."""

    def __init__(self, logger: logging.Logger, clock: Clock, every_ms: int = THROTTLE_MS) -> None:
        self.logger, self.clock, self.every_ms = logger, clock, every_ms
        self.limits: dict[str, RateLimit] = {}

    def _more(self, key: str) -> str | None:
        limit = self.limits.get(key)
        if limit is None:
            limit = self.limits[key] = RateLimit(self.clock, self.every_ms)
        held = limit.allow()
        if held is None:
            return None
        return f" ({held} more since the last such line)" if held else ""

    def log(self, key: str, level: int, msg: str, *args: object) -> None:
        more = self._more(key)
        if more is not None:
            self.logger.log(level, msg + "%s", *args, more)

    def unexpected(self, what: str, exc: BaseException) -> None:
        """An exception nobody planned for, as one ERROR line: its type and where it was raised,
        never its message (it may quote input); the traceback only with debug logging on."""
        more = self._more("unexpected")
        if more is not None:
            self.logger.error("%s: %s at %s%s", what, type(exc).__name__, raised_at(exc), more,
                              exc_info=exc if self.logger.isEnabledFor(logging.DEBUG) else None)


def raised_at(exc: BaseException) -> str:
    """Where `exc` was raised: the innermost frame, and notifyd's own innermost frame when that
    is another (a library's); file, line and function, without reading the source."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    if not frames:
        return "?"
    ours = [f for f in frames if f[0].f_code.co_filename.startswith(_PACKAGE)]
    where = _frame(*frames[-1])
    return where if not ours or ours[-1] is frames[-1] else f"{where} from {_frame(*ours[-1])}"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _frame(frame: FrameType, line: int) -> str:
    code = frame.f_code
    return f"{os.sep.join(code.co_filename.split(os.sep)[-2:])}:{line} ({code.co_name})"


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")


def one_line(text: str) -> str:
    """Control characters escaped (a user id with a newline cannot forge a second log line)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode(), text)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        record.message = one_line(record.message)
        return super().formatMessage(record)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601 in UTC, with its zone), level, logger, message,
    and the ids a line carries (`extra={"ids": {...}}`) as fields, for journald or a log
    shipper."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": iso_time(record.created), "level": record.levelname, "logger": record.name,
            "message": record.getMessage()}
        ids = getattr(record, "ids", None)
        if isinstance(ids, dict):
            out.update(ids)
        if record.exc_info:
            out["traceback"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)  # json escapes control characters itself


def step_line(logger: logging.Logger, level: int, what: str, notification_id: str, step_no: int,
              channel: str, reason: str | None = None) -> None:
    """One line about a step's fate, with the ids to follow it (never an address: reasons hold
    none); in JSON the ids are fields of their own."""
    logger.log(level, "step %s: %s:%d channel=%s%s", what, notification_id, step_no, channel,
               f" reason={reason}" if reason else "", extra={"ids": {
                   "notification_id": notification_id, "step_no": step_no, "channel": channel,
                   "decision": what}})


def iso_time(epoch_sec: float) -> str:
    """2026-09-21T14:13:20.123+00:00: what a log shipper parses without being told the zone."""
    return datetime.fromtimestamp(epoch_sec, UTC).isoformat(timespec="milliseconds")


def setup_logging(level: str = "info", fmt: str = "text", libraries: str | None = None) -> None:
    """notifyd's own lines from `level` on; the libraries' (aiosqlite, aiohttp, ...) from
    `libraries`, by default `level` but never below info: their debug lines (a line per SQL
    statement) would bury notifyd's own, so they come only when asked for."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    ours = logging.getLevelName(level.upper())
    root.setLevel(logging.getLevelName(libraries.upper()) if libraries
                  else max(ours, logging.INFO))
    logging.getLogger("notifyd").setLevel(ours)
