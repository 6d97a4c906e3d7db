"""The level-triggered safety net: a lost message cannot leave a stack IN_PROGRESS forever."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore, sqlite_url
from converge.api import Converge
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.resources.registry import PluginRegistry
from support.world import Reality

CHAIN = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
  b: {type: Test::Thing, depends_on: a}
  c: {type: Test::Thing, depends_on: b}
"""


class LossyBus(LocalBus):
    """Drops every other work message, as a broker might lose them."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.dropped = 0

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.sent += 1
        if self.sent % 2 == 1:
            self.dropped += 1
            return
        await super().send_work(message)


async def test_lost_messages_are_resent(
    tmp_path: Path, registry: PluginRegistry, reality: Reality
) -> None:
    store = SqlStore.open(sqlite_url(tmp_path / "s.db"))
    bus = LossyBus()
    # Every link through the bus (no local continuation), so the bus can lose some.
    settings = EngineSettings(sweep_interval=0.05, continue_locally=False)
    engine = Engine(store, bus, registry=registry, settings=settings)
    await engine.start()
    try:
        cv = Converge(engine)
        stack = await cv.create_stack("lossy", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert bus.dropped >= 2
        assert [name for _, name, _ in reality.log] == ["a", "b", "c"]
    finally:
        await engine.stop()
        await store.close()


async def test_checking_a_resource_twice_is_harmless(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("twice", CHAIN, wait=False)
    await cv.wait("twice")
    # re-deliver a check for the finished traversal: dropped, nothing made again
    await cv.engine.sweep()
    await cv.engine.sweep()
    assert len(reality.actions("create")) == 3


SIX = """
heat_template_version: 2021-04-16
resources:
""" + "".join(f"  r{i}: {{type: Test::Thing}}\n" for i in range(6))


class QueueBus(LocalBus):
    """Work goes to a queue that the test hands to the worker, as a broker's queue."""

    def __init__(self, queue: list[dict[str, Any]]) -> None:
        super().__init__()
        self.queue = queue

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.queue.append(message)


async def test_queued_work_is_not_resent_while_its_traversal_moves_but_a_lost_check_is(
    tmp_path: Path, registry: PluginRegistry, reality: Reality
) -> None:
    """An engine without the worker role cannot see what is queued on the broker or held
    in a worker's prefetch: work queued behind the traversal's other work is left alone
    while reports keep coming, even once the queue looks empty; the check the broker lost
    is sent again once the traversal has stalled."""
    queue: list[dict[str, Any]] = []
    # The loops are as good as off: the test sweeps itself.
    settings = EngineSettings(sweep_interval=3600.0, heartbeat_interval=3600.0)
    stores = [SqlStore.open(sqlite_url(tmp_path / "s.db")) for _ in range(2)]
    engine, worker = (
        Engine(store, QueueBus(queue), registry=registry, settings=settings, roles=(role,))
        for store, role in zip(stores, ("engine", "worker"), strict=True)
    )
    await engine.start()
    await worker.start()
    try:
        stack = await Converge(engine).create_stack("queued", SIX, wait=False)
        assert len(queue) == 6
        lost = queue.pop(3)
        held = queue.pop()  # delivered to a worker's prefetch: the queue no longer shows it
        while queue:  # work queued, one check done between every two sweeps: left alone
            for _ in range(settings.sweep_patience):
                await engine.sweep()
            await worker._on_work(queue.pop(0))
        await engine.sweep()  # nothing queued, the traversal moved: still left alone
        assert queue == [] and engine.sweeper_rescues == 0
        await worker._on_work(held)

        await engine.sweep()  # sees that last report: the traversal moved
        assert queue == []
        # No report since: stalled after the patience, the lost check is sent again.
        for _ in range(settings.sweep_patience):
            await engine.sweep()
        assert queue == [lost]
        assert engine.sweeper_rescues == 1
        await worker._on_work(queue.pop())
        record = await stores[0].get_stack(stack.id)
        assert (record.action, record.status) == ("CREATE", "COMPLETE")
        assert len(reality.actions("create")) == 6
    finally:
        await worker.stop()
        await engine.stop()
        for store in stores:
            await store.close()


async def test_a_dead_workers_work_is_resent_at_the_next_sweep_though_its_traversal_moves(
    tmp_path: Path, registry: PluginRegistry, reality: Reality
) -> None:
    """A worker that dies takes the checks it continued itself with it (no message the
    broker could give back): once the sweeper sees its heartbeat stop, it re-sends the
    ready work of its traversals at once instead of waiting for them to stall."""
    queue: list[dict[str, Any]] = []
    settings = EngineSettings(sweep_interval=3600.0, heartbeat_interval=3600.0)
    stores = [SqlStore.open(sqlite_url(tmp_path / "s.db")) for _ in range(2)]
    engine, worker = (
        Engine(store, QueueBus(queue), registry=registry, settings=settings, roles=(role,))
        for store, role in zip(stores, ("engine", "worker"), strict=True)
    )
    await engine.start()
    await worker.start()
    try:
        await engine._refresh_live_engines()  # the sweeper knows the worker alive
        stack = await Converge(engine).create_stack("died", SIX, wait=False)
        lost = queue.pop(3)  # taken by the worker, which dies with it
        for _ in range(2):  # the traversal moves
            await worker._on_work(queue.pop(0))
            await engine.sweep()
        assert engine.sweeper_rescues == 0
        await stores[1].heartbeat(worker.engine_id, time.time() - 1000)  # it died
        await engine._refresh_live_engines()
        await engine.sweep()
        assert lost in queue
        while queue:
            await worker._on_work(queue.pop(0))
        record = await stores[0].get_stack(stack.id)
        assert (record.action, record.status) == ("CREATE", "COMPLETE")
        assert len(reality.actions("create")) == 6
    finally:
        await worker.stop()
        await engine.stop()
        for store in stores:
            await store.close()


async def test_a_traversal_its_last_worker_left_open_is_completed_once_it_stalls(
    tmp_path: Path, registry: PluginRegistry, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker that stored the last report died before completing the stack: the
    sweeper completes it, but only once it has stayed open for the patience (completing a
    big stack takes its last worker a while)."""
    queue: list[dict[str, Any]] = []
    settings = EngineSettings(sweep_interval=3600.0, heartbeat_interval=3600.0)
    stores = [SqlStore.open(sqlite_url(tmp_path / "s.db")) for _ in range(2)]
    engine, worker = (
        Engine(store, QueueBus(queue), registry=registry, settings=settings, roles=(role,))
        for store, role in zip(stores, ("engine", "worker"), strict=True)
    )

    async def dies_first(stack_id: str, traversal_id: str) -> bool:
        return False

    monkeypatch.setattr(worker.operations, "complete_traversal", dies_first)
    await engine.start()
    await worker.start()
    try:
        stack = await Converge(engine).create_stack("open", SIX, wait=False)
        while queue:
            await worker._on_work(queue.pop(0))
        for _ in range(settings.sweep_patience):
            await engine.sweep()
            assert (await stores[0].get_stack(stack.id)).status == "IN_PROGRESS"
        await engine.sweep()
        record = await stores[0].get_stack(stack.id)
        assert (record.action, record.status) == ("CREATE", "COMPLETE")
        assert engine.sweeper_rescues == 1
        assert queue == []  # nothing was re-sent: every node had reported
    finally:
        await worker.stop()
        await engine.stop()
        for store in stores:
            await store.close()
