"""aiohttp's server logger, standing in: a malformed request from a client (a header over the
limit, Content-Length with Transfer-Encoding, garbage on the port) is one WARNING line without a
traceback, rate-limited; every other error keeps its traceback."""

from __future__ import annotations

import logging
import sys
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

from notifyd.core.clock import Clock
from notifyd.core.logs import RateLimit, printable

MALFORMED_EVERY_MS = 10_000


class ServerLog(logging.LoggerAdapter):  # type: ignore[type-arg]
    """aiohttp's server logger, with clients' malformed HTTP as a rate-limited WARNING."""

    def __init__(self, clock: Clock, name: str = "notifyd.http") -> None:
        super().__init__(logging.getLogger(name), {})
        self.malformed = RateLimit(clock, MALFORMED_EVERY_MS)

    def exception(self, msg: object, *args: Any, exc_info: Any = True, **kw: Any) -> None:
        exc = exc_info if isinstance(exc_info, BaseException) else sys.exc_info()[1]
        if not isinstance(exc, HttpProcessingError):
            self.logger.exception(msg, *args, exc_info=exc_info, **kw)
            return
        held = self.malformed.allow()
        if held is None:
            return
        remote = printable(args[0]) if args else "?"
        more = f" ({held} more since the last such line)" if held else ""
        self.logger.warning("malformed HTTP request from %s answered %s: %s%s", remote,
                            exc.code, printable(exc.message or type(exc).__name__), more)
