"""The in-process bus: asyncio queues; the embedded default (no broker needed)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from converge.adapters import json_codec
from converge.ports import WorkHandler

ALL_TOPICS = "*"


class LocalBus:
    """Work goes to the one local handler; notifications fan out to local subscribers.

    Messages are round-tripped through JSON so that what works here also crosses a real
    broker unchanged. There is nothing to acknowledge, so work is handed over without
    waiting for it to finish, and every host is this one.
    """

    reaches_other_hosts = False

    def __init__(self) -> None:
        self._handler: WorkHandler | None = None
        self._subscribers: dict[str, set[LocalSubscription]] = {}
        self._running: set[asyncio.Future[None]] = set()

    async def connect(self) -> None:
        return  # in this process: always reachable

    async def start(self, work_handler: WorkHandler) -> None:
        self._handler = work_handler

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        if self._handler is None:
            return  # no worker here: the sweeper re-sends ready work once one runs
        # The handler has started the work when it returns; its completion is not awaited
        # here (that would run a whole chain of checks inside the first one's send). A
        # coroutine handler has not started anything yet: it runs as a task of its own.
        outcome = self._handler(json_codec.loads(json_codec.dumps(message)))
        if not isinstance(outcome, asyncio.Future):
            task = asyncio.ensure_future(outcome)
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def publish(self, topic: str, message: dict[str, Any]) -> None:
        payload = json_codec.dumps(message)
        receivers = set(self._subscribers.get(topic, ()))
        if topic != ALL_TOPICS:
            receivers |= self._subscribers.get(ALL_TOPICS, set())
        for subscription in receivers:
            subscription.deliver(json_codec.loads(payload))

    async def subscribe(self, topic: str) -> LocalSubscription:
        subscription = LocalSubscription(self, topic)
        self._subscribers.setdefault(topic, set()).add(subscription)
        return subscription

    def _unsubscribe(self, subscription: LocalSubscription) -> None:
        self._subscribers.get(subscription.topic, set()).discard(subscription)

    async def close(self) -> None:
        self._handler = None
        for subscriptions in list(self._subscribers.values()):
            for subscription in list(subscriptions):
                await subscription.close()


class LocalSubscription:
    """One subscriber's queue, registered from the moment ``subscribe`` returned."""

    def __init__(self, bus: LocalBus, topic: str) -> None:
        self.topic = topic
        self._bus = bus
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._closed = False

    def deliver(self, message: dict[str, Any]) -> None:
        if not self._closed:
            self._queue.put_nowait(message)

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            message = await self._queue.get()
            if message is None:
                self._queue.put_nowait(None)  # stay ended for later iterations
                return
            yield message

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._bus._unsubscribe(self)
            self._queue.put_nowait(None)
