"""Stand-ins for one role of the store (store/base.py), for tests of a part that holds that role.

Never a mock: `narrowed` is the real store seen as one role (anything else it is asked for is an
AttributeError naming the role), and `MemoryKeys` a whole KeyStore in memory that the KeyStore
contract (tests/contract/test_store_contract.py, TestKeys) holds to what every backend does.
"""

from __future__ import annotations

import dataclasses
import secrets
from typing import Any, TypeVar, cast

from notifyd.core.clock import Clock
from notifyd.core.models import SCOPES, ApiKey
from notifyd.core.records import KeyRecord, SigningKey, TenantRecord

R = TypeVar("R")


def members(role: type) -> frozenset[str]:
    """A role's methods, properties and attributes, its parents' included."""
    names: set[str] = set()
    for cls in role.__mro__:
        if cls.__module__ in ("typing", "builtins"):
            continue
        names |= {n for n in (*vars(cls), *getattr(cls, "__annotations__", {}))
                  if not n.startswith("_")}
    return frozenset(names)


class _Narrowed:
    __slots__ = ("_store", "_role", "_members")

    def __init__(self, store: object, role: type) -> None:
        self._store, self._role, self._members = store, role.__name__, members(role)

    def __getattr__(self, name: str) -> Any:
        if name in self._members:
            return getattr(self._store, name)
        raise AttributeError(f"{name!r}: not in {self._role}, the role this part was given")


def narrowed(store: object, role: type[R]) -> R:
    """`store` as a part holding `role` sees it: that role's methods, and nothing more."""
    return cast(R, _Narrowed(store, role))


class MemoryKeys:
    """KeyStore in dicts: tenants ('default' always there), API keys by name (kept by hash too,
    as the store keeps them), signing keys by name. Each write is dated by the clock as the
    store's own transaction would date it, never going back."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._last = 0
        self._tenants = {"default": TenantRecord("default", 0)}
        self._keys: dict[str, tuple[str, KeyRecord]] = {}  # name -> (hash, record)
        self._signing: dict[str, SigningKey] = {}

    def _now(self) -> int:
        self._last = max(self._last, self.clock.now_ms())
        return self._last

    async def create_tenant(self, name: str) -> bool:
        if name in self._tenants:
            return False
        self._tenants[name] = TenantRecord(name, self._now())
        return True

    async def tenants(self) -> list[TenantRecord]:
        return [self._tenants[name] for name in sorted(self._tenants)]

    async def find_tenant(self, name: str) -> TenantRecord | None:
        return self._tenants.get(name)

    async def create_key(self, key_hash: str, name: str, tenant: str, kinds: tuple[str, ...],
                         scopes: frozenset[str] = SCOPES) -> None:
        if name in self._keys or any(h == key_hash for h, _ in self._keys.values()):
            raise ValueError(f"a key named {name!r} or with that hash exists")
        self._keys[name] = (key_hash, KeyRecord(name, tenant, kinds, self._now(), None,
                                                tuple(sorted(scopes))))

    async def find_key(self, key_hash: str) -> ApiKey | None:
        for h, k in self._keys.values():
            if h == key_hash and k.revoked_at is None:
                return ApiKey(k.name, k.tenant, k.kinds, h, frozenset(k.scopes))
        return None

    async def list_keys(self) -> list[KeyRecord]:
        return [self._keys[name][1] for name in sorted(self._keys)]

    async def find_key_named(self, name: str) -> KeyRecord | None:
        found = self._keys.get(name)
        return found[1] if found else None

    async def revoke_key(self, name: str) -> bool:
        found = self._keys.get(name)
        if found is None or found[1].revoked_at is not None:
            return False
        self._keys[name] = (found[0], dataclasses.replace(found[1], revoked_at=self._now()))
        return True

    async def mark_key_used(self, key_hash: str) -> None:
        for name, (h, k) in list(self._keys.items()):
            if h == key_hash:
                self._keys[name] = (h, dataclasses.replace(k, last_used_at=self._now()))

    async def signing_key(self, name: str) -> bytes:
        if name not in self._signing:
            self._signing[name] = SigningKey(secrets.token_bytes(32))
        return self._signing[name].secret

    async def find_signing_key(self, name: str) -> SigningKey | None:
        return self._signing.get(name)

    async def rotate_signing_key(self, name: str, overlap_ms: int) -> SigningKey:
        fresh = secrets.token_bytes(32)
        had = self._signing.get(name)
        self._signing[name] = SigningKey(fresh) if had is None else SigningKey(
            fresh, had.secret, self._now() + overlap_ms)
        return self._signing[name]

