"""Log lines: one line each whatever the input, JSON with the ids as fields, rate limits on the
injected clock."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import datetime

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from notifyd.core.clock import FakeClock
from notifyd.core.logs import JsonFormatter, RateLimit, TextFormatter, setup_logging, step_line
from notifyd.http.serverlog import AccessLog, ServerLog


def _record(msg: str, *args: object, **extra: object) -> logging.LogRecord:
    r = logging.LogRecord("notifyd.x", logging.WARNING, __file__, 1, msg, args, None)
    r.__dict__.update(extra)
    return r


def test_a_newline_from_input_cannot_forge_a_second_line() -> None:
    line = TextFormatter().format(_record("quiet hours of %s unreadable", "acme/u1\n2026 INFO "
                                          "notifyd: forged\r\x1b[31m"))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line
    assert line.endswith("quiet hours of acme/u1\\n2026 INFO notifyd: forged\\r\\x1b[31m unreadable")


def test_json_lines_carry_the_ids_as_fields() -> None:
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("notifyd.test-json")
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        step_line(logger, logging.WARNING, "dead", "n_1", 2, "sms", "HTTP 500")
    finally:
        logger.removeHandler(handler)
    out = json.loads(JsonFormatter().format(records[0]))
    assert out["level"] == "WARNING" and out["message"] == (
        "step dead: n_1:2 channel=sms reason=HTTP 500")
    assert (out["notification_id"], out["step_no"], out["channel"], out["decision"]) == (
        "n_1", 2, "sms", "dead")


def test_a_rate_limit_lets_one_through_per_interval_and_counts_the_rest() -> None:
    clock = FakeClock()
    limit = RateLimit(clock, 10_000)
    assert limit.allow() == 0
    assert [limit.allow() for _ in range(5)] == [None] * 5
    clock.advance(10)
    assert limit.allow() == 5
    clock.advance(-3600)  # a clock stepped back lets one through rather than go silent
    assert limit.allow() == 0


def test_an_error_escaping_the_app_is_one_line_a_while_naming_where_it_was_raised(
        caplog: pytest.LogCaptureFixture) -> None:
    """aiohttp logs what escapes the app's middlewares through ServerLog: a client that can
    provoke such an error 50 times gets one line, not 50 tracebacks."""
    clock = FakeClock()
    server = ServerLog(clock, "notifyd.test-server")
    caplog.set_level(logging.INFO, "notifyd.test-server")

    def escape() -> None:
        try:
            json.loads("[" * 5000)
        except RecursionError as e:
            server.exception("Error handling request from %s", "192.0.2.1", exc_info=e)

    for _ in range(50):
        escape()
    clock.advance(10)
    escape()
    lines = [r.getMessage() for r in caplog.records]
    assert not any(r.exc_info for r in caplog.records)
    assert len(lines) == 2, lines
    assert lines[0].startswith("Error handling request from 192.0.2.1: RecursionError at json/")
    assert lines[1].endswith("(raw_decode) (49 more since the last such line)")
    caplog.clear()
    caplog.set_level(logging.DEBUG, "notifyd.test-server")  # an operator asking for everything
    clock.advance(10)
    escape()
    [record] = caplog.records
    assert record.exc_info is not None


def test_json_time_is_iso_8601_with_its_zone() -> None:
    record = _record("x")
    record.created = 1_790_000_000.25
    out = json.loads(JsonFormatter().format(record))
    assert out["time"] == "2026-09-21T14:13:20.250+00:00"
    assert datetime.fromisoformat(out["time"]).tzinfo is not None


@pytest.fixture
def root_logging() -> Iterator[None]:
    """setup_logging changes the process's loggers: put them back after."""
    root, ours = logging.getLogger(), logging.getLogger("notifyd")
    handlers, levels = root.handlers[:], (root.level, ours.level)
    yield
    root.handlers[:] = handlers
    root.setLevel(levels[0])
    ours.setLevel(levels[1])


@pytest.mark.usefixtures("root_logging")
def test_debug_is_notifyds_own_unless_the_libraries_are_asked_for() -> None:
    """aiosqlite logs every statement at DEBUG: --log-level debug would be a flood of them."""
    setup_logging("debug")
    assert logging.getLogger("notifyd.scanner").isEnabledFor(logging.DEBUG)
    assert not logging.getLogger("aiosqlite").isEnabledFor(logging.DEBUG)
    assert logging.getLogger("aiosqlite").isEnabledFor(logging.INFO)
    setup_logging("debug", libraries="debug")
    assert logging.getLogger("aiosqlite").isEnabledFor(logging.DEBUG)
    setup_logging("warning")
    assert not logging.getLogger("notifyd.scanner").isEnabledFor(logging.INFO)
    assert not logging.getLogger("aiohttp.web").isEnabledFor(logging.INFO)


async def test_the_access_log_has_fields_and_never_the_query() -> None:
    records: list[logging.LogRecord] = []
    logger = logging.getLogger("notifyd.test-access")
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    request = make_mocked_request("GET", "/v1/users/ada/inbox/stream?token=nut1.secret")
    try:
        AccessLog(logger, "").log(request, web.Response(status=200, body=b"hello"), 0.0123)
    finally:
        logger.removeHandler(handler)
    out = json.loads(JsonFormatter().format(records[0]))
    assert "secret" not in json.dumps(out)
    assert {k: out[k] for k in ("method", "path", "status", "bytes", "duration_ms")} == {
        "method": "GET", "path": "/v1/users/ada/inbox/stream", "status": 200,
        "bytes": 0, "duration_ms": 12.3}  # bytes: as written to the wire (none here)
    assert out["message"].endswith("GET /v1/users/ada/inbox/stream 200 0 12.3ms")
