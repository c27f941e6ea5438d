"""A request's params checked at accept against every template its ladder would render (each
step's medium, in the recipient's locale or the default), with the same strict rules as the
send: a missing variable is a 422 naming it and the template, not a step that dies later.

Cheap on the accept path: a kind whose templates are all of one locale needs no read of the
recipient; and params of a shape (their keys and value types, nested) that rendered once for a
kind and locale are not rendered again, so a producer posting the same kind with the same keys
pays a walk of its params. A branch on a value (`{% if amount > 100 %}{{ vip }}{% endif %}`) can
still fail at the send; that step's reason names the variable.
"""

from __future__ import annotations

from typing import Any

from notifyd.config import Config
from notifyd.core.errors import DomainError
from notifyd.core.models import AcceptInput
from notifyd.engine.render import would_link
from notifyd.engine.templates import TemplateError, Templates, why
from notifyd.store import ProfileStore

PASSED_MAX = 4096  # shapes remembered as rendering; past it the oldest is forgotten
LINK = "https://example.invalid/unsubscribe"  # stands in for a kind's unsubscribe link


class ParamCheck:
    def __init__(self, cfg: Config, templates: Templates | None, store: ProfileStore) -> None:
        self.cfg, self.templates, self.store = cfg, templates, store
        self._media = {name: _media(cfg, tuple(s.channel for s in kind.ladder))
                       for name, kind in cfg.kinds.items()}
        self._passed: dict[tuple[Any, ...], None] = {}

    def media(self, inp: AcceptInput) -> tuple[str, ...]:
        """The media the request's ladder renders (its fallback_chain's, when it has one)."""
        if inp.fallback_chain is not None:
            return _media(self.cfg, tuple(channel for channel, _ in inp.fallback_chain))
        return self._media[inp.kind]

    async def locale(self, inp: AcceptInput) -> str | None:
        """The recipient's locale, where it can change what renders (None: the default)."""
        if self.templates is None or not self.templates.localized(inp.kind):
            return None
        return await self.store.locale_of(inp.tenant, inp.user_id)

    def check(self, inp: AcceptInput, notification_id: str, locale: str | None) -> None:
        media = self.media(inp)
        if self.templates is None or not media:
            return
        key = (inp.kind, media, locale, _shape(inp.params))
        if key in self._passed:
            return
        extra = {"notification_id": notification_id, "user_id": inp.user_id,
                 "unsubscribe_url": LINK if would_link(self.cfg, inp.kind) else None}
        for medium in media:
            try:
                self.templates.render(inp.kind, medium, locale, inp.params, extra=extra)
            except TemplateError as e:
                raise DomainError("invalid_field", f"params: the template {e.template} cannot "
                                  f"render them ({why(e)})", "params") from None
        if len(self._passed) >= PASSED_MAX:
            del self._passed[next(iter(self._passed))]
        self._passed[key] = None


def _media(cfg: Config, channels: tuple[str, ...]) -> tuple[str, ...]:
    found = (cfg.catalog.medium(channel) for channel in channels)
    return tuple(dict.fromkeys(m for m in found if m is not None))


def _shape(value: Any) -> Any:
    """What a template can tell of a value without comparing it: keys and types, nested."""
    if isinstance(value, dict):
        return tuple((k, _shape(v)) for k, v in sorted(value.items()))
    if isinstance(value, list):
        return ("[]", *dict.fromkeys(_shape(v) for v in value))
    return type(value).__name__
