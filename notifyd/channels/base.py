"""The one contract every channel adapter keeps: render a step once, send it, say what happened.

`render` builds the message from the notification (on the event loop, after the claim and before
the first provider call); the sender freezes what it returns and every retry resends those exact
bytes. `send` answers with one of four outcomes. Sent: the provider took it. Rejected: a permanent
refusal (bad address, revoked token) that no retry will fix. Failed: worth retrying, maybe after
the provider's Retry-After; or, final, refused for good but not the contact's fault (our request
or settings): not retried, nothing disabled. Unknown: the request may have reached the provider
(timeout, connection lost after sending); retried under the same key. Adapters never touch the store and
never decide retry policy; sender.py does.

A channel type is declared in channels/types/<type>.py: a `ChannelType` with its settings, the
recipient contact it sends to, the templates it renders, and the module of its adapter
(channels/<type>.py), imported only when a channel of the type is built, so the config and the
catalog load no adapter. channels/types/__init__.py lists the types.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from notifyd.channels.egress import DIRECT, Egress
from notifyd.core.contacts import Contact
from notifyd.core.models import Device
from notifyd.core.text import iso


@dataclass(frozen=True, slots=True)
class RenderInput:
    """What a channel may read to build a step's message, as the claim transaction saw it."""

    notification_id: str
    step_no: int
    channel: str
    kind: str
    user_id: str
    params: dict[str, Any]
    created_at: int
    expires_at: int
    address: str | None  # the recipient's current address for the channel's contact, if any
    locale: str | None
    now: int = 0  # when it is rendered: a push TTL is expires_at - now
    # The kind's templates for this channel's medium, rendered for the recipient's locale:
    # email {subject, text, html?}, sms {text}, push {title, body}, chat {text}.
    content: Mapping[str, str] = field(default_factory=dict)
    devices: tuple[Device, ...] = ()  # push: the user's live devices of this channel's kind
    urgent: bool = False  # the kind's urgency (push Urgency: high)
    transactional: bool = True  # False: email carries List-Unsubscribe
    collapse_key: str | None = None  # push: replaces a pending undelivered message (Topic)
    unsubscribe_url: str | None = None  # one-click unsubscribe for this recipient and category


@dataclass(frozen=True)
class Message:
    idempotency_key: str  # "{notification_id}:{step_no}", never the attempt number
    destination: str
    payload: dict[str, Any]


@dataclass(frozen=True)
class Rendered:
    """What render decided, frozen on the step before the first provider call."""

    destination: str
    payload: dict[str, Any]


class RenderError(Exception):
    """A message could not be built; the step ends dead with the template and error class named."""

    def __init__(self, template: str, error: BaseException) -> None:
        self.template = template
        self.error = error
        super().__init__(f"{template}: {type(error).__name__}")


@dataclass(frozen=True)
class Sent:
    provider_ref: str | None = None
    detail: str | None = None  # what to record beside it (the segment count, each device's answer)


@dataclass(frozen=True)
class Rejected:
    reason: str


@dataclass(frozen=True)
class Failed:
    reason: str
    retry_after: float | None = None  # seconds, from the provider
    # Permanent, but not the contact's fault (our request or settings, refused for good): the
    # step ends dead now instead of retrying identical bytes, and nothing is disabled.
    final: bool = False


@dataclass(frozen=True)
class Unknown:
    reason: str


Answer = Sent | Rejected | Failed | Unknown


@dataclass(frozen=True)
class Fanout:
    """One step sent to several targets (a user's devices), each under the key
    "{idempotency_key}:{device_id}": one answer per device id. The sender makes the step Sent
    when any device took it, Rejected only when every device rejected it, and disables each
    device that rejected it."""

    results: tuple[tuple[str, Answer], ...]


Outcome = Answer | Fanout


class Channel(Protocol):
    def render(self, step: RenderInput) -> Rendered: ...

    async def send(self, message: Message) -> Outcome: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Limits:
    """What every adapter is given beside its own settings: the channel's shared knobs."""

    timeout_sec: float
    max_connections: int  # as many as both lanes may send at once
    public_url: str = ""  # server.public_url: where providers reach notifyd (status callbacks)
    egress: Egress = DIRECT  # the proxy an HTTP type's calls go through ([egress])


Build = Callable[[str, Any, Limits], Channel]  # (channel name, its type's settings, limits)


@dataclass(frozen=True)
class Adapter:
    """A channel type's Build that imports its adapter module only when a channel is built:
    the module's `build(name, settings, limits)` makes the channel."""

    module: str  # notifyd.channels.<type>

    def __call__(self, name: str, settings: Any, limits: Limits) -> Channel:
        build = cast(Build, importlib.import_module(self.module).build)
        return build(name, settings, limits)


@dataclass(frozen=True)
class ChannelType:
    """One kind of channel (`type = "..."` in a [channels.NAME] table)."""

    name: str
    summary: str  # one line, shown in the example config
    # A frozen dataclass of this type's own keys (core/fields.Checked), each declared with
    # fields.doc() and its bounds; rules() for checks across them.
    settings: type[Any]
    # What this type sends to (core/contacts.py: an address kind such as EMAIL, or the person's
    # devices of one kind), or None when it sends to no address of the person's (a producer's
    # webhook, the log).
    contact: Contact | None
    build: Build  # Adapter("notifyd.channels.<type>"): its adapter, imported when first built
    # Which templates it renders (RenderInput.content): "email", "sms", "push" or "chat"; None
    # for a type that sends the notification as data (webhook, log).
    medium: str | None = None
    # For a type whose channels choose their medium in their settings (the log's `medium`):
    # settings -> the medium, or None. Ask medium_for, never these two fields.
    medium_of: Callable[[Any], str | None] | None = None

    def medium_for(self, settings: Any) -> str | None:
        """The templates a channel of this type with `settings` renders (None: none)."""
        return self.medium_of(settings) if self.medium_of is not None else self.medium


def standard_payload(step: RenderInput) -> dict[str, Any]:
    """The notification as JSON, for channels that hand it on whole (webhook, log)."""
    return {
        "notification_id": step.notification_id, "step_no": step.step_no,
        "channel": step.channel, "kind": step.kind, "user_id": step.user_id,
        "params": step.params, "created_at": iso(step.created_at),
        "expires_at": iso(step.expires_at),
    }
