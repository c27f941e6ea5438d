"""sender.decide, the whole retry policy, with the defaults a user gets: a passing failure is
retried with full-jitter backoff until the step's deadline (the notification's expires_at), not
for a handful of attempts; a count cap still works when set; Retry-After is honoured. Time is a
number the test moves, as the engine's fake clock would."""

from __future__ import annotations

import random

from notifyd.channels.base import Answer, Failed, Sent, Unknown
from notifyd.config import ChannelConfig
from notifyd.core.models import Claim, Completion, Lane, StepState, Why
from notifyd.engine.sender import decide

NOW = 1_790_000_000_000
MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000
REFUSED = Failed("connect failed: ConnectionRefusedError")


def _claim(tries: int, expires_at: int) -> Claim:
    return Claim("n_x", 0, "email", Lane.URGENT, tries, tries, "tok", expires_at, None,
                 "a@x", {})


def _fail_until(cfg: ChannelConfig, expires_at: int, outage_ends: int | None = None,
                seed: int = 1) -> tuple[Completion, int, int]:
    """Attempts at each retry time the policy chose, refused until `outage_ends` (sent from
    then on): the last completion, when it came, and how many attempts were made."""
    rng, now, tries = random.Random(seed), NOW, 0
    while True:
        tries += 1
        answer: Answer = Sent("q1") if outage_ends is not None and now >= outage_ends \
            else REFUSED
        done = decide(cfg, _claim(tries, expires_at), answer, now, rng)
        if done.retry_at is None:
            return done, now, tries
        assert done.state is StepState.PENDING and done.why is Why.RETRY
        assert now <= done.retry_at < expires_at
        assert done.retry_at - now <= cfg.backoff_max_sec * 1000  # never longer than the cap
        now = done.retry_at


def test_the_defaults_retry_by_time_not_by_a_small_count() -> None:
    cfg = ChannelConfig()
    assert (cfg.max_attempts, cfg.backoff_base_sec, cfg.backoff_max_sec) == (0, 1.0, 300.0)
    for seed in range(20):
        done, died_at, tries = _fail_until(cfg, NOW + DAY, seed=seed)
        assert done.state is StepState.DEAD and done.why is Why.TTL and done.pull_next
        assert done.reason == (f"time to live ends after {tries} attempts; last: connect "
                               "failed: ConnectionRefusedError")
        # dead only once the next retry would fall past the deadline: within one cap of it
        assert NOW + DAY - 300_000 <= died_at < NOW + DAY
        assert tries > 200  # a day at most five minutes apart


def test_a_relay_down_for_half_an_hour_is_used_within_minutes_of_its_return() -> None:
    cfg = ChannelConfig()
    for seed in range(20):
        back = NOW + 30 * MINUTE
        done, sent_at, tries = _fail_until(cfg, NOW + DAY, outage_ends=back, seed=seed)
        assert done.state is StepState.SENT and tries > 5
        assert back <= sent_at <= back + 5 * MINUTE


def test_a_count_cap_still_ends_the_step_when_set() -> None:
    cfg = ChannelConfig(max_attempts=3)
    done, _, tries = _fail_until(cfg, NOW + DAY)
    assert (done.state, done.why, tries) == (StepState.DEAD, Why.RETRIES, 3)
    assert done.reason == ("retry budget spent after 3 attempts; last: connect failed: "
                           "ConnectionRefusedError")


def test_retry_after_is_honoured_even_past_the_backoff_cap() -> None:
    cfg = ChannelConfig()
    rng = random.Random(5)
    for tries in (1, 4, 20):
        done = decide(cfg, _claim(tries, NOW + DAY), Failed("HTTP 429", retry_after=900), NOW,
                      rng)
        assert done.state is StepState.PENDING and done.retry_at is not None
        assert NOW + 900_000 <= done.retry_at <= NOW + 900_000 + 300_000
    late = decide(cfg, _claim(1, NOW + 10 * MINUTE), Failed("HTTP 503", retry_after=900), NOW,
                  rng)
    assert (late.state, late.reason) == (StepState.DEAD,
                                         "time to live ends after 1 attempt; last: HTTP 503")


def test_an_unknown_outcome_is_retried_as_unknown_under_the_same_rules() -> None:
    cfg = ChannelConfig()
    rng = random.Random(2)
    done = decide(cfg, _claim(40, NOW + HOUR), Unknown("no reply after DATA"), NOW, rng)
    assert done.state is StepState.UNKNOWN and done.retry_at is not None
    assert done.retry_at - NOW <= 300_000
    past = decide(cfg, _claim(40, NOW), Unknown("no reply after DATA"), NOW, rng)
    assert past.state is StepState.DEAD and past.why is Why.TTL


def test_a_final_failure_is_not_retried_whatever_the_time_left() -> None:
    done = decide(ChannelConfig(), _claim(1, NOW + DAY), Failed("HTTP 409 x", final=True), NOW,
                  random.Random(1))
    assert (done.state, done.why, done.retry_at) == (StepState.DEAD, Why.REFUSED, None)
