"""Per-process caches of what never changes once stored: prepared templates and graphs.

A template row and a traversal's graph are immutable, so caching them by id is safe; the
database stays the truth (a cache miss simply reads it again).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class AsyncLru(Generic[K, V]):
    """A small LRU whose misses are filled by an async loader (one load per key at a time)."""

    def __init__(self, loader: Callable[[K], Awaitable[V]], size: int = 64) -> None:
        self._loader = loader
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    async def get(self, key: K) -> V:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        value = await self._loader(key)
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)

    def forget(self, key: K) -> None:
        self._items.pop(key, None)
