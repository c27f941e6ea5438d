"""aiohttp's server logger, standing in: a malformed request from a client (a header over the
limit, Content-Length with Transfer-Encoding, garbage on the port) is one WARNING line without a
traceback, and any other error that escapes the app's middlewares one ERROR line naming where it
was raised (core/logs.Throttled); both rate-limited, since a client can repeat them at will.

The access log (`serve --access-log`): one line per request, its parts as fields in JSON."""

from __future__ import annotations

import logging
import sys
from typing import Any

from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web import BaseRequest, StreamResponse

from notifyd.core.clock import Clock
from notifyd.core.logs import Throttled, printable
from notifyd.domain import signed

MALFORMED_EVERY_MS = 10_000


class ServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger, its exceptions as rate-limited single lines."""

    def __init__(self, clock: Clock, name: str = "notifyd.http") -> None:
        super().__init__(logging.getLogger(name), {})
        self.lines = Throttled(self.logger, clock, MALFORMED_EVERY_MS)

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kw: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if not isinstance(exc, HttpProcessingError):
            what = str(msg) % args if args else str(msg)
            if exc is None:
                self.lines.log("unexpected", logging.ERROR, "%s", printable(what))
            else:
                self.lines.unexpected(printable(what), exc)
            return
        remote = printable(args[0]) if args else "?"
        self.lines.log("malformed", logging.WARNING, "malformed HTTP request from %s answered %s: %s",
                       remote, exc.code,
                       printable(signed.redact(exc.message or type(exc).__name__)))


def loggable_path(path: str) -> str:
    """A request's path as a log line may show it: a signed link in it (/preferences/{link},
    /v1/unsubscribe/{link}) cut down to its prefix, whoever could read the log could open it."""
    return printable(signed.redact(path), 200)


class AccessLog(AbstractAccessLogger):
    """One INFO line per request: who, what, the answer, how long. The path goes without its
    query, which may hold a user token (?token= on an inbox stream), and with any signed link in
    it redacted; the fields are the same in text and, as fields of their own, in JSON."""

    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        fields = {"remote": request.remote or "-", "method": request.method,
                  "path": loggable_path(request.path), "status": response.status,
                  "bytes": response.body_length, "duration_ms": round(time * 1000, 1)}
        self.logger.info("%(remote)s %(method)s %(path)s %(status)d %(bytes)d %(duration_ms)gms",
                         fields, extra={"ids": fields})
