"""The per-process LRU: one load per key at a time, failures not cached, LRU eviction."""

from __future__ import annotations

import asyncio

import pytest

from converge.engine.cache import AsyncLru


class CountingLoader:
    def __init__(self, *, fail: bool = False) -> None:
        self.loads: list[str] = []
        self.fail = fail
        self.release = asyncio.Event()

    async def __call__(self, key: str) -> str:
        self.loads.append(key)
        await self.release.wait()
        if self.fail:
            raise LookupError(f"cannot load {key}")
        return f"value of {key}"


async def test_a_hundred_concurrent_misses_load_once() -> None:
    loader = CountingLoader()
    cache: AsyncLru[str, str] = AsyncLru(loader)
    gets = [asyncio.create_task(cache.get("t1")) for _ in range(100)]
    await asyncio.sleep(0)
    loader.release.set()
    assert set(await asyncio.gather(*gets)) == {"value of t1"}
    assert loader.loads == ["t1"]
    assert await cache.get("t1") == "value of t1" and loader.loads == ["t1"]


async def test_a_failed_load_fails_its_waiters_and_is_not_cached() -> None:
    loader = CountingLoader(fail=True)
    cache: AsyncLru[str, str] = AsyncLru(loader)
    gets = [asyncio.create_task(cache.get("t1")) for _ in range(5)]
    await asyncio.sleep(0)
    loader.release.set()
    results = await asyncio.gather(*gets, return_exceptions=True)
    assert all(isinstance(r, LookupError) for r in results)
    loader.fail = False
    assert await cache.get("t1") == "value of t1"
    assert loader.loads == ["t1", "t1"]


async def test_a_cancelled_caller_does_not_cancel_the_load_for_others() -> None:
    loader = CountingLoader()
    cache: AsyncLru[str, str] = AsyncLru(loader)
    first = asyncio.create_task(cache.get("t1"))
    second = asyncio.create_task(cache.get("t1"))
    await asyncio.sleep(0)
    first.cancel()
    loader.release.set()
    assert await second == "value of t1"
    with pytest.raises(asyncio.CancelledError):
        await first
    assert loader.loads == ["t1"]


async def test_forgetting_during_a_load_keeps_the_result_out_of_the_cache() -> None:
    loader = CountingLoader()
    cache: AsyncLru[str, str] = AsyncLru(loader)
    pending = asyncio.create_task(cache.get("t1"))
    await asyncio.sleep(0)
    cache.forget("t1")
    loader.release.set()
    assert await pending == "value of t1"
    assert await cache.get("t1") == "value of t1"
    assert loader.loads == ["t1", "t1"]


async def test_least_recently_used_is_evicted() -> None:
    loader = CountingLoader()
    loader.release.set()
    cache: AsyncLru[str, str] = AsyncLru(loader, size=2)
    await cache.get("a")
    await cache.get("b")
    await cache.get("a")  # a is now the most recent
    await cache.get("c")  # evicts b
    await cache.get("a")
    await cache.get("b")
    assert loader.loads == ["a", "b", "c", "b"]
