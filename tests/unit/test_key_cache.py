"""The key cache (http/auth.KeyCache) over the one role it holds, KeyStore: in memory here
(role_support.MemoryKeys, which the KeyStore contract holds to every backend), so each test
is the cache's rules alone, on the injected clock."""

from __future__ import annotations

import pytest
from role_support import MemoryKeys

from notifyd.core.clock import FakeClock
from notifyd.domain import signed
from notifyd.http.auth import CACHE_MS, KeyCache, hash_key, new_key


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> MemoryKeys:
    return MemoryKeys(clock)


async def test_the_key_cache_runs_on_the_injected_clock(
        store: MemoryKeys, clock: FakeClock) -> None:
    key = new_key()
    await store.create_key(hash_key(key), "k", "acme", ())
    cache = KeyCache(store, clock)
    assert await cache.find(f"Bearer {key}") is not None
    assert await store.revoke_key("k")
    clock.advance(4)
    assert await cache.find(f"Bearer {key}") is not None  # cached for 5 s
    clock.advance(2)
    assert await cache.find(f"Bearer {key}") is None  # gone on the clock the daemon keeps


async def test_a_keys_use_is_written_once_a_minute_for_keys_list(
        store: MemoryKeys, clock: FakeClock) -> None:
    key = new_key()
    await store.create_key(hash_key(key), "k", "acme", ())
    assert [k.last_used_at for k in await store.list_keys()] == [None]
    cache = KeyCache(store, clock)
    first = clock.now_ms()
    for _ in range(3):  # three requests in a minute: one write
        assert await cache.find(f"Bearer {key}") is not None
        await cache.settle()
        clock.advance(10)
    assert [k.last_used_at for k in await store.list_keys()] == [first]
    clock.advance(30)
    assert await cache.find(f"Bearer {key}") is not None
    await cache.settle()
    assert [k.last_used_at for k in await store.list_keys()] == [first + 60_000]
    assert await cache.find("Bearer nfy_made-up") is None  # no key: nothing written
    assert len(await store.list_keys()) == 1


async def test_a_token_key_rotated_reaches_the_cache_within_its_time(
        store: MemoryKeys, clock: FakeClock) -> None:
    name = signed.tenant_key_name("acme")
    cache = KeyCache(store, clock)
    assert await cache.token_keys("acme") == []  # never made: nothing verifies, nothing kept
    made = await store.signing_key(name)
    assert await cache.token_keys("acme") == [made]
    turned = await store.rotate_signing_key(name, 60_000)
    assert await cache.token_keys("acme") == [made]  # cached
    clock.advance(CACHE_MS / 1000)
    assert await cache.token_keys("acme") == [turned.secret, made]  # the overlap
    clock.advance(60)
    assert await cache.token_keys("acme") == [turned.secret]  # the overlap ended


async def test_a_named_key_lives_while_it_is_the_tenants_and_not_revoked(
        store: MemoryKeys, clock: FakeClock) -> None:
    await store.create_key(hash_key(new_key()), "k", "acme", ())
    cache = KeyCache(store, clock)
    assert await cache.live("k", "acme")
    assert not await cache.live("k", "other")
    assert not await cache.live("nobody", "acme")
    await store.revoke_key("k")
    assert await cache.live("k", "acme")  # cached
    clock.advance(CACHE_MS / 1000)
    assert not await cache.live("k", "acme")


async def test_a_clock_stepped_back_asks_the_store_again(
        store: MemoryKeys, clock: FakeClock) -> None:
    """NTP stepped the clock back: what was cached before it is not trusted."""
    name = signed.tenant_key_name("acme")
    cache = KeyCache(store, clock)
    made = await store.signing_key(name)
    assert await cache.token_keys("acme") == [made]
    turned = await store.rotate_signing_key(name, 0)
    clock.advance(-60)  # the overlap ends at the rotation's own time, still ahead of this clock
    assert await cache.token_keys("acme") == [turned.secret, made]
