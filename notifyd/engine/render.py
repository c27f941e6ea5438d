"""Rendering, between the claim and the first send: the kind's templates for the channel's medium
in the recipient's locale, then the channel's own render, as the exact text to freeze.

A claim of a few never-frozen steps (at most FREEZE_IN_CLAIM: a quiet daemon's) renders them
inside the claim transaction, on the writer's thread (SenderPool.freezer), and freezes them in
the claim's own commit; a larger claim's, and any whose render raised there, are rendered on
the event loop after the commit (SenderPool.prepare), where a bad template ends its own step
(RenderError) and holds up nothing else. What it returns is frozen on the step with the
template's version; every retry resends it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from notifyd.channels.base import Channel, RenderError, RenderInput
from notifyd.config import Config
from notifyd.core.contacts import Address, Devices
from notifyd.core.models import Claim, Freeze, Lane
from notifyd.domain import signed
from notifyd.domain.recipients import address_of, live_devices
from notifyd.engine.templates import Templates

log = logging.getLogger("notifyd.render")


def requirements(cfg: Config) -> dict[str, set[str]]:
    """Kind -> the media its ladder sends by: each needs the default locale's templates."""
    need: dict[str, set[str]] = {}
    for name, kind in cfg.kinds.items():
        media = {cfg.catalog.template_medium(s.channel) for s in kind.ladder}
        if kind.inbox:
            media.add("inbox")
        if media - {None}:
            need[name] = {m for m in media if m is not None}
    return need


def load_templates(cfg: Config) -> tuple[Templates | None, list[str]]:
    """The templates, read and compiled once, with what is wrong with them for this config
    (each line names a file); None when no kind needs any and there is no folder."""
    need = requirements(cfg)
    folder = Path(cfg.templates.folder)
    if not need and not folder.is_dir():
        return None, []
    templates = read_templates(cfg)
    return templates, templates.check(need) + templates.unknown_names(
        cfg.catalog.kinds, cfg.catalog.categories)


def read_templates(cfg: Config) -> Templates:
    """The templates folder of `cfg`, read and compiled, knowing each kind's category (for
    category_title); nothing checked against the config."""
    return Templates(Path(cfg.templates.folder), cfg.templates.default_locale,
                     cfg.templates.max_output_bytes,
                     {name: rules.category for name, rules in cfg.catalog.kinds.items()})


def would_link(cfg: Config, kind: str) -> bool:
    """Whether `kind`'s templates get an unsubscribe link: one people may turn off (not
    transactional, its category optional), with a public URL to put in it."""
    rules = cfg.catalog.kinds.get(kind)
    return rules is not None and not rules.transactional and rules.optional and bool(
        cfg.server.public_url.rstrip("/"))


KEY_EVERY_MS = 5000  # how often the preference links' key is read again: a rotation's reach


class Renderer:
    def __init__(self, cfg: Config, templates: Templates | None,
                 link_key: bytes | None = None,
                 signing_key: Callable[[str], Awaitable[bytes]] | None = None) -> None:
        self.cfg, self.templates = cfg, templates
        self.link_key = link_key  # signs unsubscribe links (the daemon's, from the store)
        self.signing_key = signing_key  # the store's: reads (or makes) a named key
        self.preference_key: bytes | None = None  # signs preference links, as refresh read it
        self._read_until = 0

    async def refresh(self, now: int) -> None:
        """Read the preference links' key again once KEY_EVERY_MS has passed, before rendering:
        after `notifyd links rotate` the next messages are signed with the new key within
        seconds (a clock stepped back reads it again too)."""
        if self.signing_key is None or not self.cfg.server.public_url.rstrip("/"):
            return
        if self.preference_key is not None and (
                self._read_until - KEY_EVERY_MS <= now < self._read_until):
            return
        self._read_until = now + KEY_EVERY_MS  # a store that fails is asked again after it
        try:
            self.preference_key = await self.signing_key(signed.PREFERENCE_LINKS_KEY)
        except Exception as e:  # noqa: BLE001 - the messages go, with the key read before
            log.warning("the preference links' key could not be read (%s); %s", e,
                        "links go signed with the key read before" if self.preference_key
                        else "messages go without a preference link until it can")

    def unsubscribe_url(self, kind: str, tenant: str, user_id: str) -> str | None:
        """A one-click unsubscribe link for a kind people may turn off (not transactional, its
        category optional), when there is a public URL to put in it."""
        rules = self.cfg.catalog.kinds.get(kind)
        if rules is None or not would_link(self.cfg, kind) or self.link_key is None:
            return None
        token = signed.make_unsubscribe(self.link_key, tenant, user_id, rules.category)
        return f"{self.cfg.server.public_url.rstrip('/')}/v1/unsubscribe/{token}"

    def preferences_url(self, tenant: str, user_id: str, now: int) -> str | None:
        """A link to the person's preference centre (every category by medium, the global
        opt-out, quiet hours) that opens it for tokens.preferences_link_ttl_sec from `now`,
        when there is a public URL to put in it."""
        base = self.cfg.server.public_url.rstrip("/")
        if not base or self.preference_key is None:
            return None
        expires = now // 1000 + self.cfg.tokens.preferences_link_ttl_sec
        link = signed.make_preferences_link(self.preference_key, tenant, user_id, expires)
        return f"{base}/preferences/{link}"

    def freeze(self, claim: Claim, adapter: Channel, now: int) -> Freeze:
        """Render a claimed step that has never been frozen, as the exact text to fix on it
        (JSON, sorted keys); raises RenderError (or anything a broken adapter raises) for a
        message that must not be sent."""
        step, template = self.render_input(claim, now)
        rendered = adapter.render(step)
        text = json.dumps(rendered.payload, sort_keys=True)
        return Freeze(claim, rendered.destination, text, template)

    def render_input(self, claim: Claim, now: int) -> tuple[RenderInput, str | None]:
        notice = claim.notice
        assert notice is not None
        r = notice.recipient
        medium = self.cfg.catalog.template_medium(claim.channel)
        kind = self.cfg.kinds.get(notice.kind)
        content: dict[str, str] = {}
        template = None
        unsubscribe = self.unsubscribe_url(notice.kind, notice.tenant, notice.user_id)
        if medium is not None:
            if self.templates is None:
                raise RenderError(f"{notice.kind}/{medium}", LookupError("no templates"))
            done = self.templates.render(notice.kind, medium, r.locale if r else None,
                                         notice.params, extra={
                                             "notification_id": claim.notification_id,
                                             "user_id": notice.user_id,
                                             "unsubscribe_url": unsubscribe,
                                             "preferences_url": self.preferences_url(
                                                 notice.tenant, notice.user_id, now)})
            content = done.parts
            template = f"{notice.kind}/{done.locale}/{medium}@{done.version}"
        contact = claim.contact
        address = address_of(r.contacts, contact) if r and isinstance(contact, Address) else ""
        return RenderInput(
            claim.notification_id, claim.step_no, claim.channel, notice.kind, notice.user_id,
            notice.params, notice.created_at, claim.expires_at, address or None,
            r.locale if r else None, now=now, content=content,
            devices=live_devices(r, contact.kind) if isinstance(contact, Devices) else (),
            urgent=claim.lane is Lane.URGENT,
            transactional=kind.transactional if kind else True,
            collapse_key=(kind.collapse_key or None) if kind else None,
            unsubscribe_url=unsubscribe), template
