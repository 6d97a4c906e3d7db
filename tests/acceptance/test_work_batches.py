"""A traversal's many leaves go several to a work message (``CheckResources``): every node
is checked once, a batch is done (acknowledged, on a broker) only when all its checks are,
and a worker prepares the traversal's template as it loads the graph."""

from __future__ import annotations

import asyncio
import dataclasses
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from converge.adapters.local_bus import LocalBus
from converge.api import Converge
from converge.engine.context import SPREAD_OVER, checks_per_message
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.errors import StoreError
from converge.messages import CheckResource, work_checks
from converge.resources.registry import PluginRegistry
from support.continuation import CountingBus
from support.engines import running_engine
from support.world import Reality

COUNT = 3 * SPREAD_OVER
MANY = "heat_template_version: 2021-04-16\nresources:\n" + "".join(
    f"  r{i}: {{type: Test::Thing}}\n" for i in range(COUNT)
)
# The loops are as good as off: nothing but the test moves the work.
QUIET = EngineSettings(sweep_interval=3600.0, heartbeat_interval=3600.0)


class QueueBus(LocalBus):
    """Work goes to a list the test hands to a worker, as a broker's queue."""

    def __init__(self, queue: list[dict[str, Any]]) -> None:
        super().__init__()
        self.queue = queue

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.queue.append(message)


def running(
    url: str,
    registry: PluginRegistry,
    bus: LocalBus,
    roles: tuple[str, ...],
    settings: EngineSettings = QUIET,
) -> AbstractAsyncContextManager[Engine]:
    return running_engine(url, registry, bus, settings, roles)


async def test_many_leaves_are_checked_once_from_fewer_messages(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    bus = CountingBus()
    async with running(database_url, registry, bus, ("engine", "worker")) as engine:
        stack = await Converge(engine).create_stack("many", MANY)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert len(bus.sent) == COUNT // checks_per_message(COUNT) < COUNT
        assert sorted(name for _, name, _ in reality.log) == sorted(f"r{i}" for i in range(COUNT))
        assert engine.sweeper_rescues == 0


async def test_a_batch_is_done_when_every_check_in_it_is(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    """What the broker's acknowledgement waits for: the future of a batch message is done
    only once all of its nodes are stored (created, reported)."""
    queue: list[dict[str, Any]] = []
    async with (
        running(database_url, registry, QueueBus(queue), ("engine",)) as engine,
        running(database_url, registry, QueueBus(queue), ("worker",)) as worker,
    ):
        stack = await Converge(engine).create_stack("many", MANY, wait=False)
        batch = queue.pop(0)
        nodes = {check.resource_id for check in work_checks(batch)}
        assert len(nodes) > 1
        await worker._on_work(batch)
        rows = await worker.ctx.store.list_resources(stack.id)
        done = {row.id for row in rows if (row.action, row.status) == ("CREATE", "COMPLETE")}
        assert nodes <= done
        assert len(reality.actions("create")) == len(nodes)
        for message in queue:  # the rest, and the stack completes
            await worker._on_work(message)
        record = await engine.ctx.store.get_stack(stack.id)
        assert (record.action, record.status) == ("CREATE", "COMPLETE")


async def test_a_batch_starts_its_checks_only_as_the_worker_has_room(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    """The prefetch counts messages: a worker full of batches must not start more checks
    than it runs at once (each waiting check is a task)."""
    queue: list[dict[str, Any]] = []
    room = 2
    narrow = dataclasses.replace(QUIET, max_concurrent_checks=room)
    async with (
        running(database_url, registry, QueueBus(queue), ("engine",)) as engine,
        running(database_url, registry, QueueBus(queue), ("worker",), narrow) as worker,
    ):
        stack = await Converge(engine).create_stack("many", MANY, wait=False)
        assert all(len(work_checks(message)) > room for message in queue)
        most = 0
        start = worker._start_check

        def counted(message: CheckResource) -> asyncio.Task[None]:
            nonlocal most
            task = start(message)
            most = max(most, len(worker._checks))
            return task

        worker._start_check = counted  # type: ignore[method-assign]
        await asyncio.gather(*(worker._on_work(message) for message in queue))
        assert most == room
        record = await engine.ctx.store.get_stack(stack.id)
        assert (record.action, record.status) == ("CREATE", "COMPLETE")
        assert len(reality.actions("create")) == COUNT


async def test_a_worker_prepares_the_template_as_it_loads_the_graph(
    database_url: str, registry: PluginRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its checks all need the template: read and prepared with the graph, before their
    own reads queue up in front of it."""
    queue: list[dict[str, Any]] = []
    async with (
        running(database_url, registry, QueueBus(queue), ("engine",)) as engine,
        running(database_url, registry, QueueBus(queue), ("worker",)) as worker,
    ):
        stack = await Converge(engine).create_stack("many", MANY, wait=False)
        record = await engine.ctx.store.get_stack(stack.id)
        assert record.raw_template_id is not None
        assert await worker.ctx.graph(stack.id, record.current_traversal) is not None

        async def unreachable(template_id: int) -> None:
            raise StoreError("read after the graph: not prepared ahead")

        monkeypatch.setattr(worker.ctx.store, "get_template", unreachable)
        definition = await worker.ctx.definitions.get(record.raw_template_id)
        assert len(definition.resources) == COUNT
