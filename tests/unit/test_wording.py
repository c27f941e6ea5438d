"""Messages the CLI, the console and the views put together from parts read as English: each is
rendered here with every state, reason and count that reaches it (the reasons made by the code
that makes them: the claim policy, the retry policy, the store's moves), and each is read for
the faults a sentence built from parts falls into: a word said twice ("held: held for"), a
count that disagrees with its noun or verb ("1 steps", "1 of them belong"), a pronoun for the
wrong number, a hole where a part was empty ("None", "()", " ;"). The messages that went wrong
before are checked word for word.
"""

from __future__ import annotations

import dataclasses
import random
import re

import pytest

from notifyd.channels.base import Answer, Failed, Rejected, Sent, Unknown
from notifyd.cli.live import decision_line
from notifyd.cli.migrate import copied_said
from notifyd.cli.notifications import dead_replay_said, replay_said
from notifyd.cli.storage import badges_said
from notifyd.cli.users import erased_said
from notifyd.client import Event as StreamEvent
from notifyd.config import ChannelConfig
from notifyd.core.catalog import KindRules, LimitRule
from notifyd.core.contacts import EMAIL
from notifyd.core.events import Audience, EventRecord
from notifyd.core.models import (
    ENDED,
    OPEN_STEP_STATES,
    REPLAYED,
    Claim,
    ClaimContext,
    DisabledContact,
    Lane,
    Recipient,
    StepState,
    Verdict,
)
from notifyd.core.records import Erased, Event, Notification, Step
from notifyd.core.steps import Cause, window_moved
from notifyd.core.text import iso
from notifyd.domain import events
from notifyd.domain.policy import decide_claim
from notifyd.domain.views import carried, said, step_ends, timeline
from notifyd.engine.replay import Replayed, late_said, replayed_said
from notifyd.engine.sender import decide
from notifyd.http.console.axis import axis
from notifyd.store.postgres.copy import Copied

NOW = 1_790_000_000_000
HOUR = 3_600_000
COUNTS = (0, 1, 2, 5)
NOUNS = ("step", "recipient", "notification", "attempt", "row", "file", "problem", "badge",
         "device", "item", "message", "receipt", "hash", "match", "decision")


def faults(text: str) -> list[str]:
    """What reads wrong in `text`, each named; none for a sentence that reads as English."""
    found = []
    words = [w.strip(",;:().").lower() for w in text.split()]  # a 'quoted' name is no word
    found += [f"{a!r} said twice" for a, b in zip(words, words[1:], strict=False)
              if a == b and any(c.isalpha() for c in a)]
    nouns = "|".join(NOUNS)
    found += [f"{m.group(0)!r}: one, many" for m in re.finditer(
        rf"\b1 (?:[a-z]+ )?(?:{nouns})e?s\b", text)]
    found += [f"{m.group(0)!r}: many, one" for m in re.finditer(
        rf"\b(?:0|[2-9]|\d\d+) (?:[a-z]+ )?(?:{nouns})\b(?!s)", text)]
    found += [f"{m.group(0)!r}: one, many" for m in re.finditer(
        r"\b(?:1|it) (?:of them )?(?:belong|were|are|have)\b", text)]
    if re.search(r"\b(?:replayed|cancelled) 1 ", text) and re.search(r"\bthem\b", text):
        found.append("one thing called 'them'")
    found += [f"hole: {m.group(0)!r}" for m in re.finditer(
        r"\bNone\b|\(\s*\)|\s[,;:.)]|[;:,]\s*[;,]|[;:,]$|^\s*[;:,]", text)]
    return found


def assert_english(*texts: str) -> None:
    wrong = {t: f for t in texts if (f := faults(t))}
    assert not wrong, wrong


@pytest.mark.parametrize(("text", "fault"), [
    ("step 0 sms: held: held for the daily digest", "said twice"),
    ("replayed 1 dead steps", "one, many"),
    ("1 of them belong to notifications", "one, many"),
    ("replayed 1 step; a running daemon sends them", "'them'"),
    ("suppressions: 2 kept as a one-way hash", ""),  # a noun outside the list: not judged
    ("state None", "hole"),
    ("cancelled 2 step", "many, one"),
    ("pulled forward: ; due", "hole"),
])
def test_the_reader_finds_each_fault_it_names(text: str, fault: str) -> None:
    assert (fault in " ".join(faults(text))) if fault else faults(text) == []


# --- what the claim and the retry policy give a step as its reason ----------------------------


def _claim_reasons() -> list[tuple[StepState, str | None]]:
    """Every reason the claim policy gives a step it does not send, with the state it leaves."""
    limit = LimitRule(1, HOUR, ("k",), (), "1 email per 3600 s")
    rules = KindRules("news", True, {"email": True}, False, (limit,), "daily", "daily 09:00")
    who = Recipient("t", "u", "UTC", None, None, None, {"email": "a@x"}, pref_version=3)
    base = ClaimContext("n_1", 1, "mail", Lane.BULK, NOW, None, NOW + HOUR, None, who, EMAIL,
                        rules=rules, medium="email")
    quiet = dataclasses.replace(who, quiet_start="00:00", quiet_end="23:59")
    contexts = [
        dataclasses.replace(base, resolution="paid"),
        dataclasses.replace(base, expires_at=NOW),
        dataclasses.replace(base, configured=False),
        dataclasses.replace(base, sibling_in_flight=0),
        dataclasses.replace(base, recipient=dataclasses.replace(who, preferences={
            "opt_out": True})),
        dataclasses.replace(base, recipient=dataclasses.replace(who, preferences={
            "categories": {"news": {"email": False}}})),
        dataclasses.replace(base, recipient=quiet),
        dataclasses.replace(base, recipient=quiet, expires_at=NOW + 1),
        dataclasses.replace(base, recipient=dataclasses.replace(who, contacts={})),
        dataclasses.replace(base, recipient=dataclasses.replace(who, disabled=(
            DisabledContact("email", "a@x", "550 no such user"),))),
        dataclasses.replace(base, sent=((limit, 1),)),
        dataclasses.replace(base, sent=((limit, 1),), rules=dataclasses.replace(
            rules, digest="")),
        dataclasses.replace(base, rules=dataclasses.replace(rules, always_digest=True)),
    ]
    out = []
    for ctx in contexts:
        d = decide_claim(ctx, NOW)
        assert d.verdict is not Verdict.SEND, ctx
        out.append((ENDED.get(d.verdict, StepState.PENDING), d.reason))
    return out


def _send_reasons() -> list[tuple[StepState, str | None]]:
    """Every reason the retry policy gives a step after a provider call."""
    rng = random.Random(1)
    answers: list[Answer] = [Sent("r1"), Sent("r1", "2 segments"), Rejected("550 no such user"),
                             Failed("HTTP 409 conflict", final=True), Failed("HTTP 500"),
                             Unknown("timed out")]
    out = []
    for cfg in (ChannelConfig(), ChannelConfig(max_attempts=1), ChannelConfig(max_attempts=2)):
        for tries in (1, 2):
            for expires_at in (NOW + HOUR, NOW + 1):
                claim = Claim("n_1", 0, "mail", Lane.BULK, tries, tries, "tok", expires_at,
                              EMAIL, "a@x", {})
                for answer in answers:
                    done = decide(cfg, claim, answer, NOW, rng)
                    out.append((done.state, done.reason))
    return out


REASONS = sorted(set(_claim_reasons() + _send_reasons() + [
    (StepState.CANCELLED, "resolved: erased"),  # a person erased
    (StepState.EXPIRED, "due after the time to live ends"),  # a send_at past it
    (StepState.UNKNOWN, "lease expired: the send may have reached the provider"),
    (StepState.PENDING, REPLAYED), (StepState.PENDING, f"{REPLAYED} (console:ops)"),
    (StepState.DEAD, "render failed: the template sms.text.j2 is missing"),
    *((state, None) for state in StepState)]), key=str)


def _step(no: int, state: StepState, reason: str | None, **more: object) -> Step:
    return Step("n_1", no, "sms", Lane.BULK, NOW + HOUR, state, 0, reason, None, None, None,
                None, None, None, NOW + 1, 0, cause=Cause(window_of=0, window_sec=30),
                **more)  # type: ignore[arg-type]


def _notification(*steps: Step, events_: tuple[Event, ...] = ()) -> Notification:
    return Notification("n_1", "acme", "ada", "k", "d1", "h", {}, "billing", NOW, NOW + HOUR,
                        None, None, None, steps, events_)


@pytest.mark.parametrize(("state", "reason"), REASONS, ids=str)
def test_every_steps_state_and_reason_reads_as_english(state: StepState,
                                                       reason: str | None) -> None:
    """Each step's line in the timeline, the console's axis and an event's ladder line."""
    n = _notification(_step(0, StepState.SENT, None), _step(1, state, reason))
    lines = timeline(n, NOW)
    marks = [m.label for row in axis(n, NOW).rows for m in row.marks]
    assert_english(*lines, *marks, events.ladder_line(n, NOW))
    if reason and state not in OPEN_STEP_STATES:
        assert f"step 1 sms: {said(state, reason)}" in "\n".join(lines)


def test_a_held_step_says_held_once_and_a_digested_one_what_became_of_its_digest() -> None:
    why = "held for the daily digest of 2026-09-22T07:00:00.000Z: over the limit of 1 sms"
    assert said(StepState.HELD, why) == why
    assert said(StepState.DEAD, "HTTP 500") == "dead: HTTP 500"
    digest = _notification(_step(0, StepState.PENDING, None))
    sent = _notification(_step(0, StepState.SENT, None))
    fates = {
        "went out in digest n_d by sms (sent)": sent,
        "carried in digest n_d, not sent yet (sms_pending)": digest,
        "carried in digest n_d, which did not go out (opted_out)": _notification(
            _step(0, StepState.SUPPRESSED, "preference: news by sms is off (preferences v2)")),
        "went out in digest n_d (presumed_delivered)": dataclasses.replace(
            digest, steps=(), pruned_at=NOW, outcome="presumed_delivered"),
        "carried in digest n_d, which is no longer on record": None}
    for text, d in fates.items():
        assert carried("n_d", d, NOW) == text
        step = _step(0, StepState.DIGESTED, why, digest_id="n_d", held_at=NOW)
        ends = step_ends(step, {"n_d": d}, NOW)
        assert ends == [(NOW, why), (NOW + 1, f"digested: {text}")]
        assert_english(*(t for _, t in ends))


def test_a_window_moved_says_from_what_it_counts() -> None:
    window, fixed = Cause(window_of=0, window_sec=30), Cause(after_sec=60)
    texts = [window_moved(cause, 0, NOW, sent, NOW + 30_000, NOW + 1)
             for cause in (window, fixed, Cause(window_of=0)) for sent in (True, False)]
    assert texts[0] == (f"window restarted: step 0 was sent at {iso(NOW)}, and its 30 s window "
                        f"counts from then; due {iso(NOW + 30_000)} instead of {iso(NOW + 1)}")
    assert texts[3] == (f"moved to follow step 0, which moved to {iso(NOW)}; due "
                        f"{iso(NOW + 30_000)} instead of {iso(NOW + 1)}")
    moved = _notification(_step(0, StepState.SENT, None), _step(1, StepState.PENDING, None),
                          events_=tuple(Event(1, NOW, t) for t in texts))
    assert_english(*texts, *timeline(moved, NOW))


@pytest.mark.parametrize("steps", [0, 1, 2])
def test_the_accepted_line_counts_its_steps(steps: int) -> None:
    n = _notification(*(_step(i, StepState.PENDING, None) for i in range(steps)))
    assert_english(*timeline(n, NOW), *timeline(dataclasses.replace(
        n, steps=(), pruned_at=NOW, outcome="sent"), NOW))


# --- an event's summary -----------------------------------------------------------------------


@pytest.mark.parametrize("size", COUNTS)
def test_an_events_summary_counts_its_recipients_and_notifications(size: int) -> None:
    e = EventRecord("acme", "launch-1", "launch", ("k",), Audience.USERS, {}, "release:2", "h",
                    "key", None, None, None, size, "", min(size, 1), NOW, None)
    for n in COUNTS:
        counts = {(state, None): n for state in events.STATES}
        counts |= {("suppressed", "preference"): n, ("suppressed", "no_contact"): 1}
        assert_english(*events.summary(e, counts, NOW))
    assert f"{size} recipient{'' if size == 1 else 's'}," in events.summary(e, {}, NOW)[1]


# --- the operator's messages: replays, erasure, badges, a copy to PostgreSQL ------------------


def test_a_bulk_replay_with_late_steps_says_so_in_english() -> None:
    """The console said "3 of them past their time to live end expired"."""
    assert replayed_said(Replayed(3, 3, 1)) == (
        "replayed 3 dead steps; 1 of them belongs to a notification past its time to live: "
        "the claim ends it expired, unsent")
    assert late_said(Replayed(2, 2, 2)) == ("all 2 belong to notifications past their time to "
                                            "live: the claim ends them expired, unsent")
    assert late_said(Replayed(1, 1, 1)) == ("it belongs to a notification past its time to "
                                            "live: the claim ends it expired, unsent")
    assert late_said(Replayed(5, 5, 0)) == ""


@pytest.mark.parametrize("replayed", COUNTS)
def test_every_replay_count_reads_as_english(replayed: int) -> None:
    texts = [replay_said(replayed, "n_1")] if replayed else []
    for late in range(replayed + 1):
        for matched in {replayed, replayed + 1}:
            done = Replayed(matched, replayed, late)
            texts += [replayed_said(done), late_said(done)] if late else [replayed_said(done)]
            for dry in (True, False):
                texts += [t for t in dead_replay_said(done, dry) if t]
    assert_english(*texts)


def test_every_erasure_count_reads_as_english() -> None:
    for n in COUNTS:
        for there in (True, False):
            e = Erased(NOW, there, there, n, n, n, n, n, n, n, n, n)
            assert_english(*erased_said("ada", "acme", e))
    one = erased_said("ada", "acme", Erased(NOW, True, False, 1, 1, 1, 1, 1, 1, 1, 1, 1))
    assert one[-2] == ("  suppressions: 1 kept as a one-way hash, 1 left as it was (another "
                       "person has the address)")


@pytest.mark.parametrize("n", COUNTS)
def test_every_badge_and_copied_row_count_reads_as_english(n: int) -> None:
    copied = [Copied("notifications", n, "c1"), Copied("steps", 1, "c2")]
    assert_english(badges_said(n), copied_said(copied, "/var/n.db", "postgresql://db/n"))


@pytest.mark.parametrize("n", COUNTS)
def test_every_count_of_decisions_a_terminal_lost_reads_as_english(n: int) -> None:
    assert_english(decision_line(StreamEvent("lost", {"count": n}, None)))
    for reason in ("over the limit of 1 sms per 3600 s", None):
        assert_english(decision_line(StreamEvent("decision", {
            "at": iso(NOW), "decision": "held for a digest", "notification_id": "n_1",
            "step_no": n, "channel": "sms", "kind": "k", "user_id": "ada", "reason": reason},
            None)))
