"""The delivery-receipt webhook as declared: the shared secret and each tenant's own (the
parser: receipts/receipt.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from notifyd.channels.types.webhook import signing_key, whsec_problem
from notifyd.core.fields import Checked, Problems, docf, sensitive
from notifyd.receipts.base import ReceiptProvider

NAME = "delivery-receipt"
TENANT_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")  # as API keys' tenants are named


@dataclass(frozen=True)
class TenantSecret(Checked):
    """[webhooks.delivery-receipt.tenants.NAME]: one tenant's own secret."""

    secret: str = sensitive("This tenant's secret, whsec_ and base64 (a secret), for its "
                            "backend alone.", "", check=whsec_problem)
    previous_secret: str = sensitive("While rotating: this tenant's old secret, still accepted "
                                     "(a secret).", "", check=whsec_problem)

    def hmac_keys(self) -> list[bytes]:
        return [k for k in map(signing_key, (self.secret, self.previous_secret)) if k]

    def rules(self) -> Problems:
        if not self.secret:
            return [("secret", "set it; previous_secret only helps a rotation"
                     if self.previous_secret else "set it, or remove the table")]
        return []


@dataclass(frozen=True)
class Settings(Checked):
    secret: str = sensitive("Verifies the Standard Webhooks signature (webhook-id, "
                            "webhook-timestamp, webhook-signature) of delivery receipts sent by "
                            "your backend: whsec_ and base64 (a secret). A receipt it verifies "
                            "may match any tenant's notifications: with several tenants, give "
                            "each its own secret instead and leave this empty. Empty, and no "
                            "tenant has one: the endpoint is off.", "", check=whsec_problem)
    previous_secret: str = sensitive("While rotating: the old secret, still accepted (a "
                                     "secret).", "", check=whsec_problem)
    tenants: dict[str, TenantSecret] = docf("A tenant's own secret: a receipt it verifies "
                                            "matches only that tenant's notifications. Its "
                                            "backend posts to /v1/webhooks/delivery-receipt/"
                                            "NAME (the URL without NAME tries every secret "
                                            "only while there are at most 8).", dict)

    def signers(self) -> list[tuple[str | None, bytes]]:
        """(the tenant it binds, or None for any, key) for every key that verifies, the
        shared secret's first."""
        shared = TenantSecret(self.secret, self.previous_secret).hmac_keys()
        return [(None, k) for k in shared] + [
            (name, k) for name, t in sorted(self.tenants.items()) for k in t.hmac_keys()]

    def signers_of(self, tenant: str | None, most: int) -> list[tuple[str | None, bytes]]:
        """The keys a request may be tried against: for a URL naming a tenant, that tenant's
        own (none for a tenant without a table); for the URL without one, every key while
        there are at most `most` of them, else the shared secret's alone, so a request
        nobody signed never costs an HMAC per tenant."""
        if tenant is not None:
            own = self.tenants.get(tenant)
            return [(tenant, k) for k in own.hmac_keys()] if own is not None else []
        count = bool(self.secret) + bool(self.previous_secret) + sum(
            bool(t.secret) + bool(t.previous_secret) for t in self.tenants.values())
        if count <= most:
            return self.signers()
        return [(None, k) for k in TenantSecret(self.secret, self.previous_secret).hmac_keys()]

    def enabled(self) -> bool:
        return bool(self.secret) or any(t.secret for t in self.tenants.values())

    def rules(self) -> Problems:
        """Each tenant's own problems, in name order, and no two owners of one secret."""
        out = []
        if self.previous_secret and not self.secret:
            out.append(("previous_secret", "set secret too; previous_secret only helps a "
                        "rotation"))
        owner = {key: "the shared secret" for tenant, key in self.signers() if tenant is None}
        for name, tenant in sorted(self.tenants.items()):
            if not TENANT_RE.fullmatch(name):
                out.append(("tenants", "tenant names are lower-case letters, digits, _ . -"))
                continue
            out += [(f"tenants.{name}.{key}", why) for key, why in tenant.problems()]
            for key in tenant.hmac_keys():
                if owner.setdefault(key, f"tenants.{name}") != f"tenants.{name}":
                    out.append((f"tenants.{name}", f"has the same secret as {owner[key]}: "
                                "each tenant needs its own"))
        return out


PROVIDER = ReceiptProvider(NAME, "receipts from your own apps and push clients (delivered, "
                                 "shown, opened), Standard Webhooks signed", Settings,
                           "notifyd.receipts.receipt", per_tenant=True)
