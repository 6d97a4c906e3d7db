"""The RabbitMQ bus (aio-pika): work queues with competing consumers, notifications by topic.

Work goes to one durable queue that every worker consumes (competing consumers, fair
prefetch), or to a host's own queue when the work may only be done on that machine.
Messages are persistent and published with confirms; a worker acknowledges a message only
when the work it started is done (its result committed), so a worker that dies mid-work
leaves the message to be delivered again, and checking a node again is harmless.

Notifications go to a topic exchange, routed by topic (``entity.<type>``,
``stack.settled``): a subscriber binds its own queue to the topics it wants, and
``subscribe`` returns once the broker has confirmed the binding.

The connection is robust: after a broker restart it reconnects and restores queues,
bindings and consumers. Anything sent while it is down is waited for a while; then a
notification is dropped with a warning, and a work message is held by this process and
sent once the broker is back. Messages are hints: the sweeper re-sends ready work from
the database when one is lost all the same (this process died holding it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import aio_pika
from aio_pika.abc import (
    AbstractChannel,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    AbstractRobustConnection,
)
from aio_pika.exceptions import AMQPError, ChannelInvalidStateError

from converge.adapters import json_codec
from converge.adapters.urls import without_password
from converge.errors import Unavailable
from converge.ports import WorkHandler

log = logging.getLogger("converge.adapters.amqp")

ALL_TOPICS = "*"
# The most unacknowledged messages AMQP lets a channel hold (prefetch-count is 16 bits).
MOST_PREFETCH = 65535
_SEND_ERRORS = (AMQPError, ChannelInvalidStateError, ConnectionError, asyncio.TimeoutError)
# Work messages a process holds while the broker is away (past ``send_timeout``), to send
# once it is back; the oldest beyond this are dropped. Dropping them all left their work to
# the sweeper, which waits minutes for a quiet traversal while the workers are busy.
MOST_HELD = 10_000


class BusError(Unavailable):
    """The broker cannot be reached or refused what was asked of it (the CLI's exit 7, as
    for any service a command needs and cannot get)."""


class _DropTransportErrors(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("error when creating transport")


@contextlib.contextmanager
def _quiet_transport_errors() -> Iterator[None]:
    """aiormq logs a failed first connection as an error of its own, a second line on a
    command's stderr before converge's message: left out while ``connect`` is waited for."""
    logger = logging.getLogger("aiormq.connection")
    dropping = _DropTransportErrors()
    logger.addFilter(dropping)
    try:
        yield
    finally:
        logger.removeFilter(dropping)


class AmqpBus:
    """The bus over one robust connection to RabbitMQ.

    ``namespace`` prefixes every queue and exchange (several deployments, or tests, can
    share one broker); ``host`` names this machine's own work queue; ``prefetch`` is how
    many work messages a consumer holds at once (started and not yet acknowledged).
    """

    reaches_other_hosts = True

    def __init__(
        self,
        url: str,
        *,
        namespace: str = "converge",
        host: str | None = None,
        prefetch: int = 64,
        send_timeout: float = 10.0,
        reconnect_interval: float = 1.0,
    ) -> None:
        self._url = url
        self.namespace = namespace
        self.host = host or socket.gethostname()
        if prefetch < 1:
            raise ValueError(f"prefetch must be at least 1, not {prefetch}")
        self._prefetch = min(prefetch, MOST_PREFETCH)
        self._send_timeout = send_timeout
        self._reconnect_interval = reconnect_interval
        self._connection: AbstractRobustConnection | None = None
        self._publishing: AbstractChannel | None = None
        self._notifications: AbstractExchange | None = None
        self._work_channel: AbstractChannel | None = None
        self._handler: WorkHandler | None = None
        self._acks = _Acknowledgements()
        self._declared_host_queues: set[str] = set()
        self._subscriptions: set[AmqpSubscription] = set()
        self._connecting = asyncio.Lock()
        self._held: deque[tuple[str, Callable[[], Awaitable[Any]]]] = deque()
        self._resending: asyncio.Task[None] | None = None

    # --- names -------------------------------------------------------------------------

    @property
    def work_queue(self) -> str:
        return f"{self.namespace}.work"

    def host_queue(self, host: str) -> str:
        return f"{self.namespace}.work.host.{host}"

    @property
    def exchange_name(self) -> str:
        return f"{self.namespace}.notifications"

    # --- lifecycle ---------------------------------------------------------------------

    async def connect(self) -> None:
        """Connect and declare the exchange and the shared work queue (idempotent).

        One connection whoever calls: the first sends of a process that did not connect
        first (a traversal's leaves, sent together) all wait for the one connection
        instead of each opening its own (67 connections for 1,000 leaves, each kept
        open, and their handshakes on the way of the first message)."""
        if self._publishing is not None:
            return
        async with self._connecting:
            if self._publishing is None:
                await self._connect()

    async def _connect(self) -> None:
        try:
            with _quiet_transport_errors():  # the BusError below says it, with the URL
                connection = await aio_pika.connect_robust(
                    self._url,
                    timeout=self._send_timeout,
                    reconnect_interval=self._reconnect_interval,
                    client_properties={"connection_name": f"converge {self.namespace} {self.host}"},
                )
        except (TimeoutError, AMQPError, OSError) as exc:
            where = without_password(self._url)
            raise BusError(f"cannot connect to the broker {where}: {exc}") from exc
        self._connection = connection
        try:
            publishing = await connection.channel(publisher_confirms=True)
            self._notifications = await publishing.declare_exchange(
                self.exchange_name, aio_pika.ExchangeType.TOPIC, durable=True
            )
            await self._declare_work_queue(publishing, self.work_queue)
        except BaseException:
            # Not half connected: the next call connects again, on a connection of its own.
            self._connection = None
            with contextlib.suppress(*_SEND_ERRORS):
                await connection.close()
            raise
        # Last: what ``connect`` looks at, so no caller sends before all of this is done.
        self._publishing = publishing

    async def start(self, work_handler: WorkHandler) -> None:
        """Consume the shared work queue and this host's own, at most ``prefetch`` at once."""
        await self.connect()
        assert self._connection is not None
        self._handler = work_handler
        self._work_channel = await self._connection.channel()
        await self._work_channel.set_qos(prefetch_count=self._prefetch)
        for name in (self.work_queue, self.host_queue(self.host)):
            queue = await self._declare_work_queue(self._work_channel, name)
            await queue.consume(self._deliver)

    async def close(self) -> None:
        self._handler = None
        await self._acks.sent()  # work done here is not delivered again
        connection, self._connection = self._connection, None
        if self._resending is not None:
            self._resending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._resending
        if self._held:
            log.warning(
                "%d held work messages not sent (the broker stayed away): "
                "the sweeper re-sends their work",
                len(self._held),
            )
            self._held.clear()
        if connection is None:
            return
        # Channels first, each awaited: closing only the connection leaves every channel's
        # close callback as a task nobody waits for, destroyed pending when the loop ends.
        for subscription in list(self._subscriptions):
            await subscription.close()
        channels = (self._work_channel, self._publishing)
        self._work_channel = self._publishing = self._notifications = None
        for channel in channels:
            if channel is not None and not channel.is_closed:
                with contextlib.suppress(*_SEND_ERRORS):
                    await channel.close()
        await connection.close()

    async def __aenter__(self) -> AmqpBus:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- work --------------------------------------------------------------------------

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        await self.connect()
        assert self._publishing is not None
        queue = self.work_queue if host is None else self.host_queue(host)
        if host is not None and queue not in self._declared_host_queues:
            # Durable before the first message, so work for a host not running yet waits.
            await self._declare_work_queue(self._publishing, queue)
            self._declared_host_queues.add(queue)
        body = aio_pika.Message(
            json_codec.dumps(message).encode(),
            content_type="application/json",
            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
        )
        channel = self._publishing

        def publish() -> Awaitable[Any]:
            return channel.default_exchange.publish(body, routing_key=queue)

        if not await self._send(publish, queue):
            self._hold(queue, publish)

    async def _deliver(self, incoming: AbstractIncomingMessage) -> None:
        """One work message: start it, wait until it is done, then acknowledge it."""
        handler = self._handler
        if handler is None:
            # Closing: left unacknowledged, so the broker gives it to another worker; kept
            # unfinished among the deliveries, so no acknowledgement of a run covers it.
            self._acks.delivered(incoming)
            return
        try:
            data = json_codec.loads(incoming.body)
        except ValueError:
            log.error("dropped an unreadable work message: %r", incoming.body[:200])
            await incoming.reject(requeue=False)
            return
        delivery = self._acks.delivered(incoming)
        try:
            # Shielded: a broker hiccup that ends this delivery must not cancel a resource
            # action half-way (unacknowledged, the message comes back and finds it done).
            await asyncio.shield(handler(data))
        except Exception:
            # A bug in the handler: acknowledged all the same, or the message would come
            # back forever; the sweeper re-sends the node from the database.
            log.exception("work handler failed")
        self._acks.done(delivery)

    async def _declare_work_queue(self, channel: AbstractChannel, name: str) -> AbstractQueue:
        return await channel.declare_queue(name, durable=True)

    # --- notifications -----------------------------------------------------------------

    async def publish(self, topic: str, message: dict[str, Any]) -> None:
        await self.connect()
        exchange = self._notifications
        assert exchange is not None
        body = aio_pika.Message(json_codec.dumps(message).encode(), content_type="application/json")
        if not await self._send(lambda: exchange.publish(body, routing_key=topic), topic):
            log.warning("dropped a notification to %s: the broker is unavailable", topic)

    async def subscribe(self, topic: str) -> AmqpSubscription:
        """Bind a queue of this subscriber's own to ``topic``; returns once it is bound."""
        await self.connect()
        assert self._connection is not None
        channel = await self._connection.channel()
        queue = await channel.declare_queue(exclusive=True, auto_delete=True)
        subscription = AmqpSubscription(channel, queue, self._subscriptions.discard)
        self._subscriptions.add(subscription)
        await queue.bind(self.exchange_name, routing_key="#" if topic == ALL_TOPICS else topic)
        await subscription.start()
        return subscription

    # --- sending through outages -------------------------------------------------------

    async def _send(self, publish: Any, where: str) -> bool:
        """Publish, waiting out a reconnection up to ``send_timeout``; False when it gave
        up (the broker is away).

        A broker that is connected but slow to confirm (busy, or holding publishers back
        under a resource alarm) is waited for however long it takes: that is backpressure.
        Dropping the message there lost work the sweeper had to find later (1,550 messages
        of nested stacks' leaves in one 100,000-resource run, the broker up throughout)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._send_timeout
        while True:
            publishing = asyncio.ensure_future(publish())
            try:
                try:
                    await asyncio.wait_for(
                        asyncio.shield(publishing), max(0.1, deadline - loop.time())
                    )
                except TimeoutError:
                    if not self._is_connected():
                        publishing.cancel()
                        raise
                    log.info("broker slow to confirm a message to %s: still waiting", where)
                    await publishing
                return True
            except _SEND_ERRORS as exc:
                if loop.time() >= deadline or self._connection is None:
                    log.info("gave up sending to %s, broker unavailable: %s", where, exc)
                    return False
                await self._reconnected(deadline - loop.time())

    def _hold(self, queue: str, publish: Callable[[], Awaitable[Any]]) -> None:
        """Keep a work message the broker could not take, to send once it is back."""
        if self._connection is None:
            log.warning("dropped a work message to %s: the bus is closed", queue)
            return
        if len(self._held) >= MOST_HELD:
            dropped, _ = self._held.popleft()
            log.warning("dropped the oldest held work message (to %s): too many held", dropped)
        self._held.append((queue, publish))
        log.warning(
            "broker unavailable: holding a work message to %s until it is back (%d held)",
            queue,
            len(self._held),
        )
        if self._resending is None or self._resending.done():
            self._resending = asyncio.get_running_loop().create_task(
                self._send_held(), name="converge-amqp-send-held"
            )

    async def _send_held(self) -> None:
        """Send the held messages, oldest first, each time the connection is back."""
        sent = 0
        while self._held and (connection := self._connection) is not None:
            await connection.connected.wait()
            queue, publish = self._held.popleft()
            if await self._send(publish, queue):
                sent += 1
            else:  # away again: first in line for the next time it is back
                self._held.appendleft((queue, publish))
        if sent:
            log.info("sent %d held work messages: the broker is back", sent)

    def _is_connected(self) -> bool:
        connection = self._connection
        return connection is not None and connection.connected.is_set()

    async def _reconnected(self, within: float) -> None:
        connection = self._connection
        if connection is None:
            return
        await asyncio.sleep(min(self._reconnect_interval, max(0.0, within)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(connection.connected.wait(), max(0.1, within))


class _Delivery:
    """A work message being done: whether it is done, and whether its acknowledgement
    went out on its own (done behind an elder still running)."""

    __slots__ = ("acknowledged", "finished", "message")

    def __init__(self, message: AbstractIncomingMessage) -> None:
        self.message = message
        self.finished = False
        self.acknowledged = False


class _Acknowledgements:
    """Acknowledges finished work messages in runs: one ``basic.ack`` with ``multiple``
    for every delivery up to the newest whose elders are all finished, sent once per turn
    of the event loop, instead of one frame (and one socket write) per message.

    A message finished behind an unfinished elder (a long action) is acknowledged on its
    own at the same turn: holding it back would keep its place in the prefetch window.
    Delivery tags count per channel; a channel the connection lost takes its
    unacknowledged messages with it (the broker delivers them again), so its entries are
    dropped.
    """

    def __init__(self) -> None:
        self._pending: dict[Any, deque[_Delivery]] = {}  # per channel, in delivery order
        self._finished: list[_Delivery] = []  # since the last flush
        self._flush: asyncio.Task[None] | None = None
        # One flush at a time: a flush decides its frames, then awaits each send. A later
        # flush deciding meanwhile could send a ``multiple`` ack covering a delivery the
        # earlier one has yet to ack alone, which the broker then calls an unknown
        # delivery tag, closing the channel (seen when checks finish in bursts).
        self._sending = asyncio.Lock()

    def delivered(self, message: AbstractIncomingMessage) -> _Delivery:
        delivery = _Delivery(message)
        self._pending.setdefault(message.channel, deque()).append(delivery)
        return delivery

    def done(self, delivery: _Delivery) -> None:
        delivery.finished = True
        self._finished.append(delivery)
        if self._flush is None:
            self._flush = asyncio.get_running_loop().create_task(self._acknowledge())

    async def sent(self) -> None:
        """Once the acknowledgements of the work finished so far are sent."""
        if self._flush is not None:
            await asyncio.shield(self._flush)

    async def _acknowledge(self) -> None:
        """At the next turn of the loop: whatever finished by then, in as few frames."""
        self._flush = None
        async with self._sending:
            await self._acknowledge_finished()

    async def _acknowledge_finished(self) -> None:
        finished, self._finished = self._finished, []
        acknowledge: list[tuple[AbstractIncomingMessage, bool]] = []
        for channel, deliveries in list(self._pending.items()):
            if channel.is_closed:
                del self._pending[channel]
                continue
            newest_of_run = None
            while deliveries and deliveries[0].finished:
                delivery = deliveries.popleft()
                if not delivery.acknowledged:
                    delivery.acknowledged = True
                    newest_of_run = delivery.message
            if newest_of_run is not None:
                acknowledge.append((newest_of_run, True))
            if not deliveries:
                del self._pending[channel]
        for delivery in finished:
            if not delivery.acknowledged and not delivery.message.channel.is_closed:
                delivery.acknowledged = True  # it stays queued until its elders finish
                acknowledge.append((delivery.message, False))
        try:
            for message, multiple in acknowledge:
                await message.ack(multiple=multiple)
        except _SEND_ERRORS as exc:
            # The channel went away meanwhile: the broker delivers them again, and the
            # repeated checks find the work done.
            log.info("could not acknowledge work messages: %s", exc)


class AmqpSubscription:
    """A subscriber's exclusive queue and its channel; iterate for the notifications."""

    def __init__(
        self,
        channel: AbstractChannel,
        queue: AbstractQueue,
        on_close: Callable[[AmqpSubscription], None] = lambda _: None,
    ) -> None:
        self._channel = channel
        self._queue = queue
        self._on_close = on_close
        self._received: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._closed = False

    async def start(self) -> None:
        await self._queue.consume(self._on_message, no_ack=True)

    async def _on_message(self, incoming: AbstractIncomingMessage) -> None:
        try:
            self._received.put_nowait(json_codec.loads(incoming.body))
        except ValueError:
            log.warning("dropped an unreadable notification: %r", incoming.body[:200])

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            message = await self._received.get()
            if message is None:
                self._received.put_nowait(None)
                return
            yield message

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._on_close(self)
        self._received.put_nowait(None)
        if not self._channel.is_closed:
            with contextlib.suppress(*_SEND_ERRORS):  # gone with the connection: so is the queue
                await self._channel.close()
