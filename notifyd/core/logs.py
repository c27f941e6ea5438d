"""Log lines a person can act on, and that input cannot flood or forge.

Every line is one line: control characters from input (a user id with a newline) are escaped.

`RateLimit` lets one line through per interval and counts what it held back.
"""

from __future__ import annotations

import json
import logging
import re
import sys
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
    """One JSON object per line: time, level, logger, message, and the ids a line carries
    (`extra={"ids": {...}}`), for journald or a log shipper."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": self.formatTime(record), "level": record.levelname, "logger": record.name,
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


def setup_logging(level: str = "info", fmt: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
