"""Per-process caches of what never changes once stored: prepared templates and graphs.

A template row and a traversal's graph are immutable, so caching them by id is safe; the
database stays the truth (a cache miss simply reads it again).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class AsyncLru(Generic[K, V]):
    """A small LRU whose misses are filled by an async loader, one load per key at a time.

    Callers that miss while a key is being loaded wait for that load instead of starting
    their own: a worker with a cold cache receiving a hundred messages of one stack
    prepares its template once, not a hundred times. The load runs as its own task, so a
    caller that is cancelled does not cancel it for the others; a load that fails is not
    cached and fails every caller that waited for it.
    """

    def __init__(self, loader: Callable[[K], Awaitable[V]], size: int = 64) -> None:
        self._loader = loader
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._loading: dict[K, asyncio.Future[V]] = {}

    async def get(self, key: K) -> V:
        if key in self._items:
            self._items.move_to_end(key)
            return self._items[key]
        loading = self._loading.get(key)
        if loading is None:
            loading = asyncio.ensure_future(self._loader(key))
            self._loading[key] = loading
            loading.add_done_callback(lambda done: self._loaded(key, done))
        return await asyncio.shield(loading)

    def _loaded(self, key: K, done: asyncio.Future[V]) -> None:
        if self._loading.get(key) is not done:
            return  # forgotten while it loaded: its callers have it, the cache does not
        del self._loading[key]
        if not done.cancelled() and done.exception() is None:
            self.put(key, done.result())

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def forget(self, key: K) -> None:
        self._items.pop(key, None)
        self._loading.pop(key, None)
