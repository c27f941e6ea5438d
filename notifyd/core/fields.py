"""Documented settings fields: every config key is declared once, with its default, the one-line
doc that `notifyd init` and notifyd.example.toml print above it, and its bounds.

Config tables (notifyd/config), each channel type's and receipt provider's own settings
(channels/types/, receipts/providers/) and a SQLite database's ([store.sqlite]) declare their keys
with these, so that loading, the environment's variables, checking, `notifyd init` and
notifyd.example.toml read one source. A table's checks are `Checked.problems()`: what its keys'
bounds say, then the table's own rules across its keys.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_SEC = 365 * 86400  # bound on every duration: a year
Problems = list[tuple[str, str]]  # (key, what is wrong with it), never its value


@dataclass(frozen=True)
class Bounds:
    """What a key's value must be beyond its type. The message names what is allowed, never the
    value (a secret may be in the wrong place), unless `says` asks for it with {value!r}."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] = ()  # "" among them: empty is allowed too
    nonempty: bool = False
    # Text (unless empty: that is nonempty's business), or each entry of a list, matches it whole.
    pattern: re.Pattern[str] | None = None
    min_length: int = 0  # text: at least this many characters, unless empty
    check: Callable[[Any], str | None] | None = None  # what else is wrong with it, or None
    # The message instead of the one made from the bounds; {value!r} and {entry} (its number)
    # name a list's entry that does not match the pattern.
    says: str = ""
    note: str = ""  # said after the made message, in parentheses

    def problem(self, value: Any) -> str | None:
        """What is wrong with `value`, or None. None itself (an optional key unset) is fine."""
        if value is None:
            return None
        if self.nonempty and not value:
            return self._say("must not be empty")
        if self.choices and value not in self.choices:
            named = ", ".join(c for c in self.choices if c)
            return self._say(f"must be one of {named}" + (", or empty" if "" in self.choices
                                                           else ""))
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and not self._within(value):
            return self._say(self._range())
        if isinstance(value, str) and value and len(value) < self.min_length:
            return self._say(f"must be at least {self.min_length} characters")
        if self.pattern is not None and value != "":
            for i, entry in enumerate(value if isinstance(value, tuple) else (value,)):
                if not (isinstance(entry, str) and self.pattern.fullmatch(entry)):
                    return self._say("must match " + self.pattern.pattern, entry, i + 1)
        return self.check(value) if self.check is not None else None

    def _within(self, value: float) -> bool:
        return ((self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
                and (self.le is None or value <= self.le))

    def _range(self) -> str:
        low = self.ge if self.ge is not None else self.gt
        if low is not None and self.le is not None:
            return f"must be {low}..{self.le}" if self.ge is not None else \
                f"must be in ({low}, {self.le}]"
        if self.le is not None:
            return f"must be <= {self.le}"
        return f"must be >= {self.ge}" if self.ge is not None else f"must be > {self.gt}"

    def _say(self, made: str, value: object = None, entry: int = 0) -> str:
        if self.says:
            return self.says.format(value=value, entry=entry)
        return f"{made} ({self.note})" if self.note else made


def doc(text: str, default: Any, **bounds: Any) -> Any:
    """A key with its default, the one-line doc that the example config prints above it, and
    its bounds (Bounds' fields: doc("...", 10, ge=1))."""
    return field(default=default, metadata=_metadata(text, bounds))


def docf(text: str, factory: Any, **bounds: Any) -> Any:
    """A key whose default is made by `factory` (a table, a table of named entries, a list);
    `names` bounds the names of a table's entries (a Bounds)."""
    return field(default_factory=factory, metadata=_metadata(text, bounds))


def sensitive(text: str, default: str = "", **bounds: Any) -> Any:
    """A documented key that holds a secret: never in the settings' repr, so a config printed
    in a log line, an error or a traceback does not show it."""
    return field(default=default, repr=False,
                 metadata={**_metadata(text, bounds), "secret": True})


def _metadata(text: str, bounds: dict[str, Any]) -> dict[str, Any]:
    names = bounds.pop("names", None)
    out: dict[str, Any] = {"doc": text}
    if bounds:
        out["bounds"] = Bounds(**bounds)
    if names is not None:
        out["names"] = names
    return out


def declared_problems(table: Any) -> Problems:
    """What the bounds of each key of `table` (a dataclass of doc() fields) say is wrong with
    it, in the order the keys are declared."""
    out = []
    for f in dataclasses.fields(table):
        bounds: Bounds | None = f.metadata.get("bounds")
        if bounds is not None and (why := bounds.problem(getattr(table, f.name))) is not None:
            out.append((f.name, why))
    return out


class Checked:
    """A table of declared keys (a frozen dataclass of doc() fields). `problems()` is what its
    keys' bounds say, then `rules()`: the table's own checks across its keys. Tables inside it
    are checked on their own, by the config's checker."""

    def problems(self) -> Problems:
        return declared_problems(self) + self.rules()

    def rules(self) -> Problems:
        return []
