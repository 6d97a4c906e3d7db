"""The in-process bus: asyncio queues; the embedded default (no broker needed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from converge.adapters import json_codec
from converge.ports import WorkHandler


class LocalBus:
    """Work goes to the one local handler; notifications fan out to local subscribers.

    Messages are round-tripped through JSON so that what works here also crosses a real
    broker unchanged.
    """

    def __init__(self) -> None:
        self._handler: WorkHandler | None = None
        self._subscribers: dict[str, set[asyncio.Queue[dict[str, Any]]]] = {}

    async def start(self, work_handler: WorkHandler) -> None:
        self._handler = work_handler

    async def send_work(self, message: dict[str, Any]) -> None:
        if self._handler is None:
            return  # no worker here: the sweeper re-sends ready work once one runs
        await self._handler(json_codec.loads(json_codec.dumps(message)))

    async def publish(self, topic: str, message: dict[str, Any]) -> None:
        payload = json_codec.dumps(message)
        for queue in list(self._subscribers.get(topic, ())) + list(
            self._subscribers.get("*", ()) if topic != "*" else ()
        ):
            queue.put_nowait(json_codec.loads(payload))

    async def subscribe(self, topic: str) -> AsyncIterator[dict[str, Any]]:
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._subscribers.setdefault(topic, set()).add(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._subscribers[topic].discard(queue)

    async def close(self) -> None:
        self._handler = None
