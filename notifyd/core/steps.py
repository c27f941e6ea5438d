"""A step's name and why it is due when it is, as records: the provider idempotency key
(`StepKey`, "n_...:STEP" or "n_...:STEP:DEVICE"), the planned cause (`Cause`) and a move of a
planned time when the step it waits on went out (`window_moved`). Each is kept as text (a receipt
carries the key; steps.cause holds the cause; events.what the move); this module is the one place
that writes and reads that text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from notifyd.core.text import is_digits, iso


@dataclass(frozen=True, slots=True)
class StepKey:
    """What a provider call goes under: the notification and step, never the attempt; a send
    to one of the person's devices adds the device id."""

    notification_id: str
    step_no: int
    device_id: str | None = None

    def __str__(self) -> str:
        key = f"{self.notification_id}:{self.step_no}"
        return f"{key}:{self.device_id}" if self.device_id else key

    @classmethod
    def parse(cls, text: str | None) -> StepKey | None:
        """The key in `text`, or None when it is not one."""
        nid, _, rest = (text or "").partition(":")
        step, _, device = rest.partition(":")
        if not nid or not is_digits(step):
            return None
        return cls(nid, int(step), device or None)


@dataclass(frozen=True, slots=True)
class Cause:
    """Why a step is due when it is: at accept (neither set), `after_sec` after accept, or when
    step `window_of`'s window of `window_sec` ends (the step it waits on went out, or ended)."""

    after_sec: float | None = None
    window_of: int | None = None
    window_sec: float = 0.0
    text: str | None = field(init=False, default=None, repr=False, compare=False)  # as kept

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", str(self) or None)  # once: every accept writes it

    def __str__(self) -> str:
        if self.after_sec is not None:
            return f"after {self.after_sec:g}"
        if self.window_of is not None:
            return f"window {self.window_of} {self.window_sec:g}"
        return ""

    @classmethod
    def parse(cls, text: str | None) -> Cause:
        """The cause kept as `text` ('after 30', 'window 0 30'); anything else is at accept."""
        words = (text or "").split()
        try:
            if len(words) == 2 and words[0] == "after":
                return cls(after_sec=float(words[1]))
            if len(words) == 3 and words[0] == "window" and is_digits(words[1]):
                return cls(window_of=int(words[1]), window_sec=float(words[2]))
        except ValueError:
            pass
        return AT_ACCEPT


AT_ACCEPT = Cause()


RESTARTED = "window restarted: "
FOLLOWS = "moved to follow step "


def window_moved(cause: Cause, before: int, before_at: int, sent: bool, at: int,
                 was: int) -> str:
    """Why a step now falls due at `at`, not `was`: step `before`, whose window it waits on,
    was sent at `before_at` (`sent`), or itself moved to then; a window counts from the send."""
    did = "was sent at" if sent else "moved to"
    if cause.window_of == before and cause.window_sec > 0:
        why = (f"{RESTARTED}step {before} {did} {iso(before_at)}, and its "
               f"{cause.window_sec:g} s window counts from then")
    else:  # due with it, at a fixed time, or after an earlier step: it keeps its place after it
        why = f"{FOLLOWS}{before}, which {did} {iso(before_at)}"
    return f"{why}; due {iso(at)} instead of {iso(was)}"


def is_window_move(what: str) -> bool:
    """Whether a step's event is a move `window_moved` wrote: not what brought its send on
    (its window's end did)."""
    return what.startswith((RESTARTED, FOLLOWS))
