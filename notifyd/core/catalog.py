"""The config compiled once into what every other part asks of it: per channel its type, the
contact it sends to and its medium; per kind its preference, attention and stop rules; per
category what a person may turn off. `config.compile_catalog` builds it (`Config.catalog`).

Plain data: the rules (domain/), the store and the engine read this, never the TOML tables nor
the channel registry, so that a pure module loads no channel adapter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from notifyd.core.contacts import Address, Contact
from notifyd.core.fields import MAX_SEC, Checked, doc

MEDIUMS = ("email", "sms", "push", "chat")  # what a person turns on and off per category
ALL_ON: Mapping[str, bool] = {m: True for m in MEDIUMS}


@dataclass(frozen=True)
class LadderStep(Checked):
    """One rung of a kind's ladder, as configured ([kinds.NAME] ladder = [...])."""

    channel: str = field(metadata={"doc": "The channel this step sends on."})
    after_sec: float | None = doc("Due this long after accept.", None, ge=0, le=MAX_SEC)
    timeout_sec: float | None = doc("This step's window: the next step is due when it ends.", None,
                                    ge=0, le=MAX_SEC)


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """One configured channel, as the rest of notifyd sees it."""

    name: str
    type: str  # its channel type (channels/types/<type>.py)
    contact: Contact | None  # what it sends to (None: no address of the person's)
    # Its medium: email, sms, push, chat (None: none): the person's switches and the send limits
    # of that medium apply, and it renders the kind's templates of it unless `templates` is off.
    medium: str | None
    # False for a type whose message the provider holds (WhatsApp's approved templates): it
    # renders no template files, though its medium still counts for preferences and limits.
    templates: bool = True

    @property
    def suppression(self) -> str | None:
        """The suppression list a dead address of this channel goes on."""
        return self.contact.suppression if self.contact is not None else None


@dataclass(frozen=True, slots=True)
class CategoryRules:
    """A preference category: may a person turn it off, and what is on until they choose."""

    name: str
    optional: bool = True
    defaults: Mapping[str, bool] = field(default_factory=lambda: ALL_ON)
    # The media its kinds' ladders can send by (a kind whose requests may replace the ladder:
    # every channel's), in MEDIUMS order: the switches a preference centre shows.
    media: tuple[str, ...] = MEDIUMS


@dataclass(frozen=True, slots=True)
class LimitRule:
    """At most `count` sends per `window_ms` to one person, of what it matches."""

    count: int
    window_ms: int
    kinds: tuple[str, ...]  # the kinds it counts (all it could match); empty: every kind
    channels: tuple[str, ...]  # the channels it counts (of its medium); empty: every channel
    label: str  # "3 push per 3600 s", for reasons

    def covers(self, kind: str, channel: str) -> bool:
        return (not self.kinds or kind in self.kinds) and (
            not self.channels or channel in self.channels)


@dataclass(frozen=True, slots=True)
class KindRules:
    """What the rules know of a kind beyond its ladder."""

    category: str
    optional: bool  # may a person turn the category off at all
    defaults: Mapping[str, bool]  # medium -> on until the person chooses
    transactional: bool
    limits: tuple[LimitRule, ...] = ()
    digest: str = ""  # the digest kind that collects held items ("": none)
    digest_schedule: str = ""  # that digest kind's schedule ("daily 09:00")
    always_digest: bool = False
    stop: str = "resolved"  # what ends the ladder: resolved, delivered, read
    read_on_resolve: bool = False  # its inbox item is marked read when it is resolved


@dataclass(frozen=True)
class Catalog:
    channels: Mapping[str, ChannelInfo] = field(default_factory=dict)
    kinds: Mapping[str, KindRules] = field(default_factory=dict)
    categories: Mapping[str, CategoryRules] = field(default_factory=dict)  # all a person sees
    # Channel -> the profile field of the address it sends to, for the channels that send to
    # an address: what every accept's planning asks, so kept ready.
    address_fields: Mapping[str, str] = field(init=False, repr=False, compare=False)
    # The kinds whose inbox item is marked read when they are resolved: what every resolution
    # hands the store.
    read_on_resolve: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "address_fields", {
            name: info.contact.field for name, info in self.channels.items()
            if isinstance(info.contact, Address)})
        object.__setattr__(self, "read_on_resolve", frozenset(
            name for name, rules in self.kinds.items() if rules.read_on_resolve))

    def contact(self, channel: str) -> Contact | None:
        """What `channel` sends to; None for one that sends to no address of the person's, or
        that is not configured (any more)."""
        info = self.channels.get(channel)
        return info.contact if info is not None else None

    def medium(self, channel: str) -> str | None:
        info = self.channels.get(channel)
        return info.medium if info is not None else None

    def template_medium(self, channel: str) -> str | None:
        """The medium whose template files `channel` renders (None: it renders none)."""
        info = self.channels.get(channel)
        return info.medium if info is not None and info.templates else None

    def category(self, name: str) -> CategoryRules:
        """A category's rules; one not configured is optional with every medium on."""
        return self.categories.get(name) or CategoryRules(name)

    def stop(self, kind: str) -> str:
        rules = self.kinds.get(kind)
        return rules.stop if rules is not None else "resolved"
