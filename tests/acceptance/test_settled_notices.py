"""A process that waits on work other processes do (``converge apply`` with a broker)
hears of the stack settling from their ``stack.settled`` notice, not at its next poll."""

from __future__ import annotations

import asyncio
from typing import Any

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore
from converge.api import Converge
from converge.engine.operations import SETTLED_TOPIC
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.resources.registry import PluginRegistry

TWO = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
  b: {type: Test::Thing, depends_on: a}
"""
# Far longer than the test may take: only the notice can end the wait in time.
POLL = 3600.0
QUIET = EngineSettings(sweep_interval=3600.0, heartbeat_interval=3600.0)


class SharedBus(LocalBus):
    """One in-process bus for two engines, that says it reaches other hosts (as a broker
    does), counting the subscriptions to the settled notices."""

    reaches_other_hosts = True

    def __init__(self) -> None:
        super().__init__()
        self.settled_subscriptions = 0

    async def subscribe(self, topic: str) -> Any:
        self.settled_subscriptions += topic == SETTLED_TOPIC
        return await super().subscribe(topic)


async def test_a_waiting_client_hears_the_stack_settle(
    database_url: str, registry: PluginRegistry
) -> None:
    bus = SharedBus()
    stores = [SqlStore.open(database_url) for _ in range(2)]
    worker = Engine(stores[0], bus, registry=registry, settings=QUIET, roles=("worker",))
    client = Engine(stores[1], bus, registry=registry, settings=QUIET, roles=())
    await worker.start()
    await client.start()
    try:
        cv = Converge(client)
        started = await cv.create_stack("heard", TWO, wait=False)
        operation = cv.operation(started.id)
        assert operation is not None
        done = await asyncio.wait_for(
            client.operations.wait_operation(
                started.id, operation.traversal_id, operation.template_id, poll=POLL
            ),
            timeout=10,
        )
        assert done.state == "CREATE_COMPLETE"
        # Subscribed once for every later wait of this process.
        await asyncio.wait_for(client.operations.wait_settled(started.id, poll=POLL), 10)
        assert bus.settled_subscriptions == 1
    finally:
        await client.stop()
        await worker.stop()
        for store in stores:
            await store.close()


async def test_without_a_broker_nothing_is_subscribed(
    database_url: str, registry: PluginRegistry
) -> None:
    """In one process the engine signals the waiter itself: no subscription is made."""
    bus = SharedBus()
    bus.reaches_other_hosts = False
    store = SqlStore.open(database_url)
    engine = Engine(store, bus, registry=registry, settings=QUIET)
    await engine.start()
    try:
        stack = await Converge(engine).create_stack("local", TWO)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert bus.settled_subscriptions == 0
    finally:
        await engine.stop()
        await store.close()
