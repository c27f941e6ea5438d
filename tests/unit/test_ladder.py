"""Ladders as data: step timing, quiet hours in the recipient's zone, disabled contacts."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from support import Api

from notifyd.config import LadderStep
from notifyd.core.catalog import Catalog, ChannelInfo
from notifyd.core.contacts import EMAIL, PHONE, SLACK
from notifyd.core.models import DisabledContact, PlannedStep, Recipient, StepState
from notifyd.domain.ladder import plan_steps, quiet_until
from notifyd.domain.recipients import dead_contacts

CATALOG = Catalog({name: ChannelInfo(name, "test", contact, None) for name, contact in (
    ("log", SLACK), ("sms", PHONE), ("email", EMAIL))})
NY, PARIS = "America/New_York", "Europe/Paris"


def ms(zone: str, y: int, mo: int, d: int, h: int, mi: int, fold: int = 0) -> int:
    """Epoch ms of a wall-clock time in `zone`; fold=1 picks the second of a repeated hour."""
    return int(datetime(y, mo, d, h, mi, tzinfo=ZoneInfo(zone), fold=fold).timestamp() * 1000)


def who(zone: str | None = None, quiet: tuple[str, str] | None = None,
        disabled: dict[str, str] | None = None) -> Recipient:
    start, end = quiet or (None, None)
    dead = tuple(DisabledContact(c, "", why) for c, why in (disabled or {}).items())
    return Recipient("acme", "u1", zone, None, start, end, {}, dead)


def plan(ladder: tuple[LadderStep, ...], now: int, r: Recipient | None = None,
         urgent: bool = False) -> list[PlannedStep]:
    return plan_steps(ladder, CATALOG, now, r, urgent, dead_contacts(r))


def times(steps: list[PlannedStep]) -> list[int]:
    return [s.send_after for s in steps]


NOW = ms("UTC", 2026, 1, 15, 12, 0)
WINDOWS = (LadderStep("log", timeout_sec=30), LadderStep("sms", timeout_sec=60),
           LadderStep("email"))


def test_timeout_sec_a_step_is_due_when_the_one_before_times_out() -> None:
    steps = plan(WINDOWS, NOW)
    assert times(steps) == [NOW, NOW + 30_000, NOW + 90_000]
    assert [s.channel for s in steps] == ["log", "sms", "email"]
    assert all(s.state == StepState.PENDING and s.note is None for s in steps)


def test_after_sec_counts_from_accept() -> None:
    ladder = (LadderStep("log"), LadderStep("sms", after_sec=120),
              LadderStep("email", after_sec=300))
    assert times(plan(ladder, NOW)) == [NOW, NOW + 120_000, NOW + 300_000]


def test_a_step_is_never_due_before_the_one_ahead_of_it() -> None:
    ladder = (LadderStep("log", after_sec=60), LadderStep("sms", after_sec=10))
    assert times(plan(ladder, NOW)) == [NOW + 60_000, NOW + 60_000]


def test_quiet_hours_across_midnight_move_a_step_to_the_window_end() -> None:
    late = ms(NY, 2026, 1, 15, 23, 30)
    r = who(NY, ("22:00", "07:00"))
    steps = plan(WINDOWS, late, r)
    morning = ms(NY, 2026, 1, 16, 7, 0)
    assert times(steps) == [morning, morning + 30_000, morning + 90_000]  # moved, none dropped
    assert steps[0].note is not None
    assert "quiet hours 22:00-07:00 America/New_York" in steps[0].note
    assert "2026-01-15 23:30" in steps[0].note
    assert steps[1].note is None  # 07:00:30 is outside the window


def test_quiet_hours_after_midnight_end_the_same_morning() -> None:
    r = who(NY, ("22:00", "07:00"))
    assert quiet_until(ms(NY, 2026, 1, 16, 2, 0), r) == ms(NY, 2026, 1, 16, 7, 0)
    assert quiet_until(ms(NY, 2026, 1, 16, 7, 0), r) is None
    assert quiet_until(ms(NY, 2026, 1, 16, 21, 59), r) is None


def test_a_step_that_runs_into_quiet_hours_is_moved_too() -> None:
    ladder = (LadderStep("log", timeout_sec=3600), LadderStep("sms"))
    steps = plan(ladder, ms(NY, 2026, 1, 15, 21, 30), who(NY, ("22:00", "07:00")))
    assert times(steps) == [ms(NY, 2026, 1, 15, 21, 30), ms(NY, 2026, 1, 16, 7, 0)]
    assert steps[0].note is None and steps[1].note is not None


def test_urgent_kinds_bypass_quiet_hours() -> None:
    late = ms(NY, 2026, 1, 15, 23, 30)
    steps = plan(WINDOWS, late, who(NY, ("22:00", "07:00")), urgent=True)
    assert times(steps) == [late, late + 30_000, late + 90_000]
    assert all(s.note is None for s in steps)


def test_a_same_day_window() -> None:
    r = who(PARIS, ("13:00", "14:00"))
    assert quiet_until(ms(PARIS, 2026, 6, 1, 13, 30), r) == ms(PARIS, 2026, 6, 1, 14, 0)
    assert quiet_until(ms(PARIS, 2026, 6, 1, 12, 59), r) is None
    assert quiet_until(ms(PARIS, 2026, 6, 1, 14, 0), r) is None
    assert quiet_until(ms(PARIS, 2026, 6, 1, 23, 0), r) is None


def test_no_quiet_hours_or_an_empty_window_moves_nothing() -> None:
    assert quiet_until(NOW, None) is None
    assert quiet_until(NOW, who("UTC")) is None
    assert quiet_until(NOW, who("UTC", ("12:00", "12:00"))) is None


def test_quiet_hours_default_to_utc_without_a_timezone() -> None:
    r = who(None, ("11:00", "13:00"))
    assert quiet_until(NOW, r) == ms("UTC", 2026, 1, 15, 13, 0)


def test_quiet_hours_over_the_spring_dst_change() -> None:
    # Europe/Paris 2026-03-29: 02:00 CET becomes 03:00 CEST, so the night is an hour short.
    r = who(PARIS, ("22:00", "07:00"))
    late = ms(PARIS, 2026, 3, 28, 23, 0)
    end = quiet_until(late, r)
    assert end == ms(PARIS, 2026, 3, 29, 7, 0)
    assert end - late == 7 * 3600_000  # eight wall-clock hours, seven real ones


def test_a_window_ending_in_the_spring_gap_ends_at_the_jump() -> None:
    # 02:30 does not exist in Paris on 2026-03-29; the step must land after now, outside quiet.
    r = who(PARIS, ("22:00", "02:30"))
    late = ms(PARIS, 2026, 3, 28, 23, 0)
    end = quiet_until(late, r)
    assert end is not None and end > late
    assert quiet_until(end, r) is None
    assert end == ms(PARIS, 2026, 3, 29, 3, 0)  # the jump itself: the clock passes 02:30 there


def test_quiet_hours_in_the_repeated_autumn_hour_never_move_a_step_earlier() -> None:
    # Europe/Paris 2026-10-25: 03:00 CEST falls back to 02:00 CET; 02:00-03:00 happens twice.
    r = who(PARIS, ("22:00", "02:30"))
    second_0215 = ms(PARIS, 2026, 10, 25, 2, 15, fold=1)
    end = quiet_until(second_0215, r)
    assert end is not None and end > second_0215


def test_a_disabled_contact_is_suppressed_and_the_next_step_takes_its_slot() -> None:
    r = who(disabled={"phone": "number unreachable"})
    steps = plan(WINDOWS, NOW, r)
    assert [(s.channel, s.state) for s in steps] == [
        ("log", StepState.PENDING), ("sms", StepState.SUPPRESSED), ("email", StepState.PENDING)]
    assert steps[1].reason == "suppression_list: number unreachable"
    assert times(steps) == [NOW, NOW + 30_000, NOW + 30_000]


def test_a_disabled_first_contact_hands_its_slot_to_the_second() -> None:
    r = who(disabled={"slack_user_id": "bounced"})
    steps = plan(WINDOWS, NOW, r)
    assert steps[0].state == StepState.SUPPRESSED
    assert times(steps)[1] == NOW  # not NOW + 30 s: the dead step's window collapsed


async def test_a_post_during_quiet_hours_stores_the_shifted_time(api: Api) -> None:
    api.clock.ms = ms(NY, 2026, 11, 15, 23, 30)  # later than the start: times never go back
    status, user = await api.call("PUT", "/v1/users/u1", {
        "timezone": NY, "quiet_hours": {"start": "22:00", "end": "07:00"}})
    assert status == 200, user
    status, body = await api.post({"user_id": "u1", "kind": "alert"})
    assert status == 202
    rows = [(s.send_after, s.note) for s in (await api.record(body["notification_id"])).steps]
    morning = ms(NY, 2026, 11, 16, 7, 0)
    assert [at for at, _ in rows] == [morning, morning + 30_000, morning + 90_000]
    assert "quiet hours 22:00-07:00" in rows[0][1]
    _, status_doc = await api.get(f"/v1/notifications/{body['notification_id']}")
    assert status_doc["steps"][0]["send_after"] == "2026-11-16T12:00:00.000+00:00"
    assert status_doc["steps"][0]["note"] == rows[0][1]


async def test_an_urgent_post_during_quiet_hours_is_not_moved(api: Api) -> None:
    api.clock.ms = late = ms(NY, 2026, 11, 15, 23, 30)
    await api.call("PUT", "/v1/users/u1", {
        "timezone": NY, "quiet_hours": {"start": "22:00", "end": "07:00"}})
    _, body = await api.post({"user_id": "u1", "kind": "page"})
    rows = [(s.send_after, s.note, s.lane)
            for s in (await api.record(body["notification_id"])).steps]
    assert rows == [(late, None, "urgent"), (late + 30_000, None, "urgent")]


def test_after_sec_steps_keep_their_spacing_when_quiet_hours_move_the_first() -> None:
    r = who("UTC", ("22:00", "07:00"))
    ladder = (LadderStep("push"), LadderStep("sms", after_sec=300), LadderStep("email", after_sec=3600))
    at = ms("UTC", 2026, 10, 1, 23, 0)
    steps = plan_steps(ladder, Catalog(), at, r, False, {})
    seven = ms("UTC", 2026, 10, 2, 7, 0)
    assert [s.send_after for s in steps] == [seven, seven + 300_000, seven + 3_600_000]
