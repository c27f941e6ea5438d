"""A kind's message as a channel would send it, for an operator to read before anyone gets it:
what `notifyd templates render` prints and the console's template preview shows. Both call
preview() here, so the two can never say different things: the channel's medium as the catalog
knows it, the params read as JSON, the templates rendered as the send renders them (the
recipient's locale chain, sample values for the links and ids a send fills in), and each
problem worded once.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from notifyd.core.catalog import Catalog
from notifyd.core.names import locale_key
from notifyd.engine.templates import MEDIA, TemplateError, Templates

# What a send fills in beside the params, as a preview shows it.
SAMPLES: Mapping[str, Any] = MappingProxyType({
    "notification_id": "preview", "user_id": "preview",
    "unsubscribe_url": "https://example.invalid/unsubscribe",
    "preferences_url": "https://example.invalid/preferences"})


class PreviewError(ValueError):
    """What cannot be previewed, worded for the operator; `field` names the input at fault
    (channel, params), None when a template itself failed."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Preview:
    kind: str
    medium: str
    locale: str  # the locale folder rendered
    asked: str | None  # the locale asked for, when another folder was rendered
    version: str
    files: tuple[str, ...]
    parts: tuple[tuple[str, str], ...]  # (part, text), in the medium's order

    @property
    def heading(self) -> str:
        asked = f" (asked {self.asked})" if self.asked else ""
        return f"{self.kind} by {self.medium} in {self.locale}{asked}, version {self.version}"

    def text(self) -> str:
        """The layout `notifyd templates render` prints: the files, then each part under its
        name."""
        lines = [self.heading, *(f"  {path}" for path in self.files)]
        for part, text in self.parts:
            lines += ["", f"----- {part} -----", text]
        return "\n".join(lines) + "\n"


def medium_of(catalog: Catalog, channel: str) -> str:
    """The medium whose templates `channel` renders: a configured channel's, or a medium named
    outright (email, sms, push, chat, inbox)."""
    if channel in catalog.channels:
        medium = catalog.template_medium(channel)
        if medium is None:
            raise PreviewError(f"{channel!r} is a {catalog.channels[channel].type} channel, which "
                               "renders no templates", "channel")
        return medium
    if channel not in MEDIA:
        raise PreviewError(f"{channel!r} is neither a channel with templates nor a medium "
                           f"({', '.join(MEDIA)})", "channel")
    return channel


def parse_params(text: str) -> dict[str, Any]:
    try:
        values = json.loads(text)
    except ValueError as e:
        raise PreviewError(f"not JSON ({e})", "params") from None
    if not isinstance(values, dict):
        raise PreviewError("must be a JSON object", "params")
    return values


def preview(templates: Templates, catalog: Catalog, kind: str, channel: str,
            locale: str | None, params: str) -> Preview:
    """`kind`'s templates for `channel`'s medium, rendered for a recipient of `locale` with the
    params (JSON text); PreviewError says what went wrong."""
    medium = medium_of(catalog, channel)
    values = parse_params(params)
    try:
        r = templates.render(kind, medium, locale or None, values, extra=SAMPLES)
    except TemplateError as e:
        raise PreviewError(f"{e.template}: {type(e.error).__name__}: {e.error}") from None
    asked = locale if locale and locale_key(locale) != locale_key(r.locale) else None
    return Preview(kind, medium, r.locale, asked, r.version, r.files, tuple(r.parts.items()))
