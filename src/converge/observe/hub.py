"""Subscriptions to change notifications: one bus subscription per topic, fanned out locally.

A subscription is registered when it is opened (``async with`` or its first ``__anext__``),
not lazily at some later step, and opening returns only once the bus has the subscription
in place: a consumer that opens it before reading a snapshot is sure to receive every
notification published after that read began.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from types import TracebackType

from converge.messages import ChangeNotification, MessageError
from converge.ports import Bus, Subscriber

log = logging.getLogger("converge.observe")

ALL_TOPICS = "*"  # the bus's wildcard: every topic


def topic_for(type_name: str | None) -> str:
    return ALL_TOPICS if type_name is None else ChangeNotification.topic(type_name)


class NotificationHub:
    """Pumps each topic from the bus into the queues of this process's subscriptions."""

    def __init__(self, bus: Bus) -> None:
        self._bus = bus
        self._pumps: dict[str, asyncio.Task[None]] = {}
        self._queues: dict[str, set[asyncio.Queue[ChangeNotification | None]]] = {}

    async def attach(self, topic: str) -> asyncio.Queue[ChangeNotification | None]:
        """A queue receiving every notification on ``topic`` published from now on."""
        queue: asyncio.Queue[ChangeNotification | None] = asyncio.Queue()
        if topic not in self._pumps:
            # The bus subscription is in place when ``subscribe`` returns (a broker has
            # confirmed the binding): only then does the queue count as attached.
            stream = await self._bus.subscribe(topic)
            if topic in self._pumps:  # another attach got there while we waited
                await stream.close()
            else:
                self._pumps[topic] = asyncio.create_task(
                    self._pump(topic, stream), name=f"converge-observe-subscription-{topic}"
                )
        self._queues.setdefault(topic, set()).add(queue)
        return queue

    def detach(self, topic: str, queue: asyncio.Queue[ChangeNotification | None]) -> None:
        self._queues.get(topic, set()).discard(queue)

    async def _pump(self, topic: str, stream: Subscriber) -> None:
        try:
            async for data in stream:
                if data.get("message") != ChangeNotification.message:
                    continue  # another kind of message on the wildcard topic
                try:
                    notification = ChangeNotification.from_dict(data)
                except MessageError:
                    log.warning("dropped an unreadable change notification: %r", data)
                    continue
                for queue in list(self._queues.get(topic, ())):
                    queue.put_nowait(notification)
        finally:
            await stream.close()

    async def close(self) -> None:
        """Stop every pump; open subscriptions end."""
        pumps, self._pumps = list(self._pumps.values()), {}
        for pump in pumps:
            pump.cancel()
        for pump in pumps:
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        for queues in self._queues.values():
            for queue in queues:
                queue.put_nowait(None)
        self._queues.clear()


class Subscription:
    """Change notifications of one type (or all): an async iterator and context manager."""

    def __init__(self, hub: NotificationHub, type_name: str | None) -> None:
        self._hub = hub
        self._topic = topic_for(type_name)
        self._queue: asyncio.Queue[ChangeNotification | None] | None = None
        self._closed = False

    async def open(self) -> Subscription:
        """Register now (idempotent): notifications published after this are delivered."""
        if self._queue is None and not self._closed:
            self._queue = await self._hub.attach(self._topic)
        return self

    def close(self) -> None:
        self._closed = True
        if self._queue is not None:
            self._hub.detach(self._topic, self._queue)
            self._queue.put_nowait(None)

    def pending(self) -> int:
        """Notifications received and not yet taken."""
        return 0 if self._queue is None else self._queue.qsize()

    async def __aenter__(self) -> Subscription:
        return await self.open()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> ChangeNotification:
        await self.open()
        if self._queue is None:
            raise StopAsyncIteration
        notification = await self._queue.get()
        if notification is None:
            self._queue.put_nowait(None)  # stay ended for later calls
            raise StopAsyncIteration
        return notification
