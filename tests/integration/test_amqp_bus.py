"""The RabbitMQ bus against the real broker on 127.0.0.1:5672 (skipped without one, failing
under CI=true). Every test has its own namespace of queues and exchange, deleted after."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from converge.adapters.amqp_bus import AmqpBus
from support.amqp import delete_namespace
from support.proxy import FlakyLink

pytestmark = pytest.mark.rabbitmq

Handler = Callable[[dict[str, Any]], Awaitable[None]]


@pytest.fixture
async def namespace(rabbitmq_url: str) -> AsyncIterator[str]:
    name = f"converge-test-{uuid.uuid4().hex[:10]}"
    yield name
    await delete_namespace(rabbitmq_url, name, hosts=("h1", "h2"))


@pytest.fixture
async def buses(rabbitmq_url: str, namespace: str) -> AsyncIterator[Callable[..., AmqpBus]]:
    """Make buses of the test's namespace (processes, as far as the broker knows)."""
    made: list[AmqpBus] = []

    def make(url: str = rabbitmq_url, **options: Any) -> AmqpBus:
        options.setdefault("host", "h1")
        bus = AmqpBus(url, namespace=namespace, reconnect_interval=0.2, **options)
        made.append(bus)
        return bus

    yield make
    for bus in made:
        await bus.close()


async def until(condition: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


def handled_into(received: list[tuple[str, int]], name: str, delay: float = 0.0) -> Handler:
    def handle(data: dict[str, Any]) -> asyncio.Future[None]:
        async def work() -> None:
            await asyncio.sleep(delay)
            received.append((name, int(data["n"])))

        return asyncio.ensure_future(work())

    return handle


async def test_competing_consumers_share_the_work_and_each_message_is_done_once(
    buses: Callable[..., AmqpBus],
) -> None:
    received: list[tuple[str, int]] = []
    first, second, sender = buses(prefetch=1), buses(prefetch=1), buses()
    await first.start(handled_into(received, "first", delay=0.02))
    await second.start(handled_into(received, "second", delay=0.02))
    for n in range(30):
        await sender.send_work({"n": n})
    await until(lambda: len(received) >= 30)
    await asyncio.sleep(0.1)  # nothing more arrives
    assert sorted(n for _, n in received) == list(range(30))
    workers = {name for name, _ in received}
    assert workers == {"first", "second"}  # fair prefetch: both worked


async def test_work_is_acknowledged_only_when_done(buses: Callable[..., AmqpBus]) -> None:
    """A worker that dies mid-work has not acknowledged: the message goes to another."""
    taken: list[dict[str, Any]] = []
    never_done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def stuck(data: dict[str, Any]) -> asyncio.Future[None]:
        taken.append(data)
        return never_done

    doomed, sender = buses(prefetch=4), buses()
    await doomed.start(stuck)
    await sender.send_work({"n": 7})
    await until(lambda: len(taken) == 1)
    await doomed.close()  # dies with the work unfinished
    never_done.cancel()
    received: list[tuple[str, int]] = []
    survivor = buses()
    await survivor.start(handled_into(received, "survivor"))
    await until(lambda: received == [("survivor", 7)])
    # and a message whose work finished is not delivered again
    await survivor.close()
    again: list[tuple[str, int]] = []
    late = buses()
    await late.start(handled_into(again, "late"))
    await asyncio.sleep(0.3)
    assert again == []


async def test_work_for_a_host_goes_to_that_host_only(buses: Callable[..., AmqpBus]) -> None:
    received: list[tuple[str, int]] = []
    one, two, sender = buses(host="h1"), buses(host="h2"), buses(host="h1")
    await one.start(handled_into(received, "h1"))
    await two.start(handled_into(received, "h2"))
    for n in range(6):
        await sender.send_work({"n": n}, host="h2")
    await until(lambda: len(received) == 6)
    assert {name for name, _ in received} == {"h2"}


async def test_notifications_are_routed_by_topic(buses: Callable[..., AmqpBus]) -> None:
    listener, publisher = buses(), buses()
    only_a = await listener.subscribe("entity.T::A")
    everything = await listener.subscribe("*")
    for topic in ("entity.T::B", "entity.T::A", "stack.settled"):
        await publisher.publish(topic, {"topic": topic})
    got_a = await asyncio.wait_for(anext(aiter(only_a)), 5)
    assert got_a == {"topic": "entity.T::A"}
    stream = aiter(everything)
    got_all = [await asyncio.wait_for(anext(stream), 5) for _ in range(3)]
    assert [m["topic"] for m in got_all] == ["entity.T::B", "entity.T::A", "stack.settled"]
    await asyncio.sleep(0.2)
    await only_a.close()
    assert [m async for m in only_a] == []  # nothing else came for T::A


async def test_subscribe_returns_once_bound(buses: Callable[..., AmqpBus]) -> None:
    """Subscribe, then publish at once from another connection: never lost."""
    listener, publisher = buses(), buses()
    await publisher.connect()
    for round_ in range(10):
        topic = f"entity.T::Round{round_}"
        subscription = await listener.subscribe(topic)
        await publisher.publish(topic, {"round": round_})
        got = await asyncio.wait_for(anext(aiter(subscription)), 5)
        assert got == {"round": round_}
        await subscription.close()


async def test_reconnects_after_the_broker_went_away(
    buses: Callable[..., AmqpBus], rabbitmq_url: str
) -> None:
    """The link drops (as in a broker restart): consumers, bindings and sending come back."""
    link = FlakyLink(("127.0.0.1", 5672))
    await link.up()
    proxied_url = rabbitmq_url.replace(":5672", f":{link.port}")
    try:
        received: list[tuple[str, int]] = []
        worker = buses(proxied_url, send_timeout=15.0)
        await worker.start(handled_into(received, "worker"))
        subscription = await worker.subscribe("entity.T::X")
        direct = buses()
        await direct.send_work({"n": 1})
        await until(lambda: received == [("worker", 1)])

        await link.down()
        await asyncio.sleep(0.5)
        # sent through the broken link: waited out until the link is back
        sending = asyncio.ensure_future(worker.send_work({"n": 2}))
        await asyncio.sleep(0.5)
        await link.up()
        await asyncio.wait_for(sending, 15)
        # at least once: work whose acknowledgement the outage swallowed comes back too
        await until(lambda: {n for _, n in received} == {1, 2}, timeout=15)
        # consumers and bindings restored: work and notifications from elsewhere arrive
        await direct.send_work({"n": 3})
        await until(lambda: {n for _, n in received} == {1, 2, 3}, timeout=15)
        await direct.publish("entity.T::X", {"after": "reconnect"})
        got = await asyncio.wait_for(anext(aiter(subscription)), 15)
        assert got == {"after": "reconnect"}
        await worker.close()
    finally:
        await link.down()


async def test_work_sent_while_the_broker_is_away_is_held_and_sent_when_it_is_back(
    buses: Callable[..., AmqpBus], rabbitmq_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Past ``send_timeout`` the sender goes on and holds the message; once the broker is
    back it is sent, with no send of its own (it was dropped: left to the sweeper, which
    waits minutes for a quiet traversal while the workers are busy)."""
    caplog.set_level(logging.INFO, logger="converge.adapters.amqp")
    link = FlakyLink(("127.0.0.1", 5672))
    await link.up()
    proxied_url = rabbitmq_url.replace(":5672", f":{link.port}")
    try:
        received: list[tuple[str, int]] = []
        await buses().start(handled_into(received, "worker"))
        sender = buses(proxied_url, send_timeout=0.3)
        await sender.send_work({"n": 1})
        await until(lambda: received == [("worker", 1)])
        await link.down()
        await asyncio.sleep(0.3)
        await asyncio.wait_for(sender.send_work({"n": 2}), 5)  # not waiting for the broker
        await asyncio.wait_for(sender.send_work({"n": 3}), 5)
        assert "holding a work message" in caplog.text
        await asyncio.sleep(0.5)
        assert received == [("worker", 1)]
        await link.up()
        await until(lambda: sorted(n for _, n in received) == [1, 2, 3], timeout=15)
        # Sent by the held-message task, which says so once the broker confirmed them: a
        # consumer may have them before (in one go, or in two when the link's going down
        # was noticed between the two holds).
        await until(lambda: _held_sent(caplog.text) == 2, timeout=5)
    finally:
        await link.down()


def _held_sent(log: str) -> int:
    return sum(int(n) for n in re.findall(r"sent (\d+) held work messages", log))


async def test_work_in_progress_outlives_a_dropped_link(
    buses: Callable[..., AmqpBus], rabbitmq_url: str
) -> None:
    """The broker going away mid-work does not cancel the work (it is not acknowledged,
    so the broker delivers it again; the repeated check finds it done)."""
    link = FlakyLink(("127.0.0.1", 5672))
    await link.up()
    proxied_url = rabbitmq_url.replace(":5672", f":{link.port}")
    started, finished, cancelled = asyncio.Event(), asyncio.Event(), asyncio.Event()

    def slow(data: dict[str, Any]) -> asyncio.Future[None]:
        async def work() -> None:
            started.set()
            try:
                await asyncio.sleep(0.5)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            finished.set()

        return asyncio.ensure_future(work())

    try:
        worker = buses(proxied_url)
        await worker.start(slow)
        await buses().send_work({"n": 1})
        await asyncio.wait_for(started.wait(), 10)
        await link.down()
        await asyncio.wait_for(finished.wait(), 5)
        assert not cancelled.is_set()
        await worker.close()
    finally:
        await link.down()


async def test_a_worker_holds_as_many_messages_as_it_runs_checks_at_once(
    rabbitmq_url: str, namespace: str, buses: Callable[..., AmqpBus]
) -> None:
    """The bus a process opens takes ``work_prefetch`` messages from the broker at once,
    never more than it runs checks at once."""
    from converge.api import _amqp_bus
    from converge.engine.settings import EngineSettings

    settings = EngineSettings(max_concurrent_checks=3, work_prefetch=1000, host="h1")
    bus = _amqp_bus(rabbitmq_url, namespace, settings)
    assert isinstance(bus, AmqpBus)
    release = asyncio.Event()
    started: list[int] = []

    def hold(data: dict[str, Any]) -> asyncio.Future[None]:
        started.append(int(data["n"]))
        return asyncio.ensure_future(release.wait())

    sender = buses()
    try:
        await bus.start(hold)
        for n in range(10):
            await sender.send_work({"n": n})
        await until(lambda: len(started) == 3)
        await asyncio.sleep(0.2)
        assert len(started) == 3  # the rest wait in the queue, for this or another worker
        release.set()
        await until(lambda: len(started) == 10)
    finally:
        release.set()
        await bus.close()


async def test_finished_work_is_acknowledged_behind_a_long_one(
    buses: Callable[..., AmqpBus],
) -> None:
    """Acknowledgements go in runs, but a message finished behind one still running is
    acknowledged all the same: it frees its place in the prefetch window."""
    long_one: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    finished: list[int] = []

    def handle(data: dict[str, Any]) -> asyncio.Future[None]:
        if data["n"] == 0:
            return long_one

        async def quick() -> None:
            finished.append(int(data["n"]))

        return asyncio.ensure_future(quick())

    worker, sender = buses(prefetch=3), buses()
    await worker.start(handle)
    for n in range(20):
        await sender.send_work({"n": n})
    await until(lambda: len(finished) == 19)
    long_one.set_result(None)


async def test_acknowledged_work_is_not_delivered_again(buses: Callable[..., AmqpBus]) -> None:
    received: list[tuple[str, int]] = []
    first, sender = buses(prefetch=16), buses()
    await first.start(handled_into(received, "first"))
    for n in range(50):
        await sender.send_work({"n": n})
    await until(lambda: len(received) == 50)
    await first.close()  # right after the last one finished: its acknowledgement is sent
    again: list[tuple[str, int]] = []
    await buses().start(handled_into(again, "again"))
    await asyncio.sleep(0.5)
    assert again == []


async def test_sends_before_any_connection_share_one(
    buses: Callable[..., AmqpBus], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that sends many messages at once before it connected (a traversal's
    leaves from a client that did not connect first) opens one connection, not one each."""
    import converge.adapters.amqp_bus as amqp_bus

    opened: list[object] = []
    real_connect = amqp_bus.aio_pika.connect_robust

    async def counting(*args: Any, **kwargs: Any) -> Any:
        connection = await real_connect(*args, **kwargs)
        opened.append(connection)
        return connection

    monkeypatch.setattr(amqp_bus.aio_pika, "connect_robust", counting)
    received: list[tuple[str, int]] = []
    worker, sender = buses(), buses()
    await worker.start(handled_into(received, "worker"))
    opened.clear()
    await asyncio.gather(*(sender.send_work({"n": n}) for n in range(20)))
    assert len(opened) == 1
    await until(lambda: len(received) == 20)
    assert sorted(n for _, n in received) == list(range(20))


async def test_a_slow_confirm_is_waited_for_not_dropped(
    buses: Callable[..., AmqpBus], caplog: pytest.LogCaptureFixture
) -> None:
    """Connected but slow (a busy broker): past ``send_timeout`` the publish is still
    waited for, not abandoned; dropping is for a broker that is gone."""
    bus = buses(send_timeout=0.2)
    await bus.send_work({"n": 0})  # connected
    confirmed: list[bool] = []

    async def slow_publish() -> None:
        await asyncio.sleep(0.6)
        confirmed.append(True)

    await bus._send(slow_publish, "a slow queue")
    assert confirmed == [True]
    assert "dropped a message" not in caplog.text
