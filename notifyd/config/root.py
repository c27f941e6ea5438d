"""The whole config: every table by name ([server], [channels.NAME], [[limits]], ...), and the
catalog compiled from it once for the rest of notifyd: each channel's contact and medium from
its type's declaration, each category's switches, each kind's rules and the send limits that
count it."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from notifyd.channels import TYPES as CHANNEL_TYPES
from notifyd.config.policy import (
    DEFAULT_CATEGORY,
    NAMES,
    CategoryConfig,
    ChannelConfig,
    EventTypeConfig,
    KindConfig,
    LimitConfig,
    TenantConfig,
    default_channels,
    default_kinds,
)
from notifyd.config.process import (
    ConsoleConfig,
    DaemonConfig,
    EgressConfig,
    FanoutConfig,
    QuotasConfig,
    RetentionConfig,
    ScannerConfig,
    ServerConfig,
    StoreConfig,
    TemplatesConfig,
    TokensConfig,
)
from notifyd.core.catalog import MEDIUMS, Catalog, CategoryRules, ChannelInfo, KindRules, LimitRule
from notifyd.core.fields import docf


@dataclass(frozen=True)
class Config:
    server: ServerConfig = docf("The HTTP API.", ServerConfig)
    store: StoreConfig = docf("The database.", StoreConfig)
    scanner: ScannerConfig = docf("The due-work scanner.", ScannerConfig)
    templates: TemplatesConfig = docf("Message templates for email, SMS, push, chat and the inbox.",
                                      TemplatesConfig)
    daemon: DaemonConfig = docf("Process lifecycle.", DaemonConfig)
    retention: RetentionConfig = docf("What ages out of the database, and when.",
                                      RetentionConfig)
    fanout: FanoutConfig = docf("Events' fan-out to their audiences (POST /v1/events).",
                                FanoutConfig)
    quotas: QuotasConfig = docf("What one tenant may take of what all tenants share: quotas "
                                "(none by default) and shares of the stream places.",
                                QuotasConfig)
    tokens: TokensConfig = docf("User tokens for a person's own inbox and preferences.",
                                TokensConfig)
    egress: EgressConfig = docf(
        "Outbound HTTP: the proxy the HTTP channels and the SNS certificate fetch go through "
        "(SMTP never does). A key left empty is taken from the environment variable of its "
        "name, upper or lower case (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).", EgressConfig)
    console: ConsoleConfig = docf("The operator console, the inbox widget and the preference "
                                  "centre.", ConsoleConfig)
    channels: dict[str, ChannelConfig] = docf(
        "Channels by name; ladders refer to these names.", default_channels, names=NAMES)
    kinds: dict[str, KindConfig] = docf(
        "Notification kinds by name: each its ladder and policy.", default_kinds, names=NAMES)
    categories: dict[str, CategoryConfig] = docf(
        "Preference categories by name; a kind's category not listed here is optional with "
        "every medium on.", dict, names=NAMES)
    limits: tuple[LimitConfig, ...] = docf("Send limits per person ([[limits]]).", tuple)
    tenants: dict[str, TenantConfig] = docf("Per-tenant settings by tenant name.", dict)
    events: dict[str, EventTypeConfig] = docf(
        "Event types by name: the kinds each recipient of an event gets.", dict, names=NAMES)
    # Providers' delivery webhooks by provider name: each its declared settings
    # (receipts/providers/<name>.py), on when its secret is set. Built by load.py from the
    # registry, not from a type hint.
    webhooks: dict[str, Any] = field(default_factory=dict, metadata={
        "doc": "Providers' delivery webhooks by provider name.", "webhooks": True})

    @functools.cached_property
    def catalog(self) -> Catalog:
        """This config compiled for the rest of notifyd (compile_catalog), once."""
        return compile_catalog(self)

    def quota(self, tenant: str, name: str) -> Any:
        """A tenant's quota `name` ([quotas]): its own in [tenants.NAME] if it sets one (not
        -1), else the [quotas] value; 0: none."""
        own = self.tenants.get(tenant)
        value = getattr(own, name) if own is not None else -1
        return getattr(self.quotas, name) if value == -1 else value

    def webhook(self, name: str) -> Any | None:
        """The provider's settings if its webhook is on, else None."""
        settings = self.webhooks.get(name)
        return settings if settings is not None and settings.enabled() else None


def compile_catalog(cfg: Config) -> Catalog:
    """What the rest of notifyd reads of the config: each channel's type, contact and medium;
    each category's switches; each kind's category, preference defaults, limits, digest and
    stop rule. The one place that asks the channel registry what a channel sends to."""
    channels = {name: ChannelInfo(name, ch.type, CHANNEL_TYPES[ch.type].contact,
                                  CHANNEL_TYPES[ch.type].medium_for(ch.settings),
                                  CHANNEL_TYPES[ch.type].templates)
                for name, ch in cfg.channels.items()}
    named = {name: kind.category or name for name, kind in cfg.kinds.items()}
    media = _media(cfg, named, channels)
    categories = {}
    for name in sorted(set(named.values()) | set(cfg.categories)):
        cat = cfg.categories.get(name, DEFAULT_CATEGORY)
        categories[name] = CategoryRules(name, cat.optional, {m: getattr(cat, m) for m in MEDIUMS},
                                         media.get(name, ()))
    kinds = {}
    for name, kind in cfg.kinds.items():
        rules = categories[named[name]]
        digest = cfg.kinds.get(kind.digest)
        kinds[name] = KindRules(rules.name, rules.optional, rules.defaults, kind.transactional,
                                _limits(cfg, name, named, channels), kind.digest,
                                digest.schedule if digest else "", kind.always_digest, kind.stop,
                                kind.read_on_resolve)
    return Catalog(channels, kinds, categories)


def _media(cfg: Config, named: dict[str, str],
           channels: dict[str, ChannelInfo]) -> dict[str, tuple[str, ...]]:
    """Category -> the media its kinds' ladders can send by: the union over its kinds, each
    its ladder's channels' media (every channel's, for a kind whose requests may name their own
    fallback_chain), in MEDIUMS order."""
    every = {info.medium for info in channels.values()}
    found: dict[str, set[str | None]] = {}
    for name, kind in cfg.kinds.items():
        used = every if kind.allow_override else {
            channels[s.channel].medium for s in kind.ladder if s.channel in channels}
        found.setdefault(named[name], set()).update(used)
    return {cat: tuple(m for m in MEDIUMS if m in used) for cat, used in found.items()}


def _limits(cfg: Config, kind: str, named: dict[str, str],
            channels: dict[str, ChannelInfo]) -> tuple[LimitRule, ...]:
    """The send limits that count `kind`: each with every kind and channel it counts."""
    people = [c for c, info in channels.items() if info.medium is not None]
    limits = []
    for lim in cfg.limits:
        if lim.kind and lim.kind != kind or lim.category and lim.category != named[kind]:
            continue
        counted = tuple(k for k in cfg.kinds if (not lim.kind or k == lim.kind) and (
            not lim.category or named[k] == lim.category))
        counts = tuple(c for c in people if not lim.medium or channels[c].medium == lim.medium)
        of = lim.kind or lim.category
        label = f"{lim.count} {lim.medium or 'sends'} per {lim.per_sec:g} s" + (
            f" of {of}" if of else "")
        limits.append(LimitRule(lim.count, int(lim.per_sec * 1000), counted if of else (),
                                counts, label))
    return tuple(limits)
