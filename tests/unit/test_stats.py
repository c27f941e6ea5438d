"""`notifyd stats`: the daemon's /metrics for a terminal, every figure under a heading that says
what it is, each table's columns aligned however long its names."""

from __future__ import annotations

from notifyd.core.models import StepState, Why
from notifyd.engine.metrics import Metrics, summary


def _section(lines: list[str], heading: str) -> list[str]:
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("    ")),
               len(lines))
    return lines[start:end]


def _metrics() -> Metrics:
    m = Metrics()
    m.sends.labels("email", "sent").inc(12)
    m.sends.labels("sms-backup", "failed").inc(3)
    m.due_lag.labels("email", "urgent").set(0)
    m.due_lag.labels("sms-backup", "bulk").set(42.5)
    m.breaker_state("email", "closed")
    m.breaker_state("sms-backup", "open")
    m.step_ended(StepState.SENT, Why.OK, 6)
    m.resolved("invoice", 1, 2)
    return m


def test_the_breakers_are_named_by_state_not_by_a_legend_of_numbers() -> None:
    lines = summary(_metrics().text().decode())
    assert not any("0 closed" in line for line in lines)
    assert _section(lines, "breaker state by channel:") == [
        "    email       closed", "    sms-backup  open"]


def test_each_table_lines_up_its_columns() -> None:
    lines = summary(_metrics().text().decode())
    assert _section(lines, "sends by channel and outcome:") == [
        "    email       sent    12", "    sms-backup  failed  3"]
    assert _section(lines, "due lag (s) by channel and lane:") == [
        "    email       urgent  0", "    sms-backup  bulk    42.5"]


def test_the_cancelled_share_is_read_from_the_counters() -> None:
    lines = summary(_metrics().text().decode())
    assert "cancelled by a resolution: 2 of 8 ended steps (25%)" in lines
