"""The consumer flow: no change lost or applied twice across the subscribe/snapshot boundary."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from observe_support import FakeClock, Inventory, Listed, registry_of

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore
from converge.engine.settings import EngineSettings
from converge.messages import ChangeKind, ChangeNotification
from converge.observe import ChangeFilter, Snapshot, Subscription, Synchronizer, consume

TYPE = "T::Listed"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = SqlStore.open(f"sqlite:///{tmp_path}/state.db")
    yield store
    await store.close()


class View:
    """A consumer's picture of the world, and every change it applied."""

    def __init__(self) -> None:
        self.hashes: dict[str, str] = {}
        self.snapshot_seq: int | None = None
        self.applied: list[int] = []

    async def apply_snapshot(self, snapshot: Snapshot) -> None:
        self.snapshot_seq = snapshot.seq_of(TYPE)
        self.hashes = {e.physical_id: e.hash for e in snapshot.entities}

    async def apply_change(self, note: ChangeNotification) -> None:
        self.applied.append(note.seq)
        if note.kind == ChangeKind.GONE:
            assert note.physical_id in self.hashes, f"gone before seen: {note}"
            del self.hashes[note.physical_id]
        else:
            assert (note.kind == ChangeKind.APPEARED) == (note.physical_id not in self.hashes)
            assert note.hash is not None
            self.hashes[note.physical_id] = note.hash


async def truth(sync: Synchronizer) -> dict[str, str]:
    return {e.physical_id: e.hash for e in (await sync.get_all(TYPE)).entities}


async def caught_up(sync: Synchronizer, view: View) -> None:
    for _ in range(500):
        if view.snapshot_seq is not None and view.hashes == await truth(sync):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"consumer fell behind: {view.hashes} != {await truth(sync)}")


class RacingSource:
    """A synchronizer whose snapshot read is overtaken: changes land right before the read
    (after the subscription opened) and right after it (before the consumer applied it)."""

    def __init__(self, sync: Synchronizer, inventory: Inventory) -> None:
        self.sync = sync
        self.inventory = inventory
        self.before: list[ChangeNotification] = []
        self.after: list[ChangeNotification] = []

    def subscribe(self, type_name: str | None = None) -> Subscription:
        return self.sync.subscribe(type_name)

    async def get_all(self, type_name: str | None = None) -> Snapshot:
        self.inventory.put("a", v=2)
        self.inventory.put("new", v=1)
        self.before = await self.sync.sample_once(TYPE)
        snapshot = await self.sync.get_all(type_name)
        self.inventory.put("a", v=3)
        del self.inventory.things["b"]
        self.after = await self.sync.sample_once(TYPE)
        return snapshot


async def test_changes_racing_the_snapshot_are_applied_once_and_none_is_lost(
    store: SqlStore,
) -> None:
    inv = Inventory()
    sync = Synchronizer(store, LocalBus(), registry_of(**{TYPE: (Listed, inv)}), FakeClock())
    inv.put("a", v=1)
    inv.put("b", v=1)
    await sync.sample_once()
    racing, view = RacingSource(sync, inv), View()
    task = asyncio.create_task(consume(racing, TYPE, view.apply_snapshot, view.apply_change))
    try:
        await caught_up(sync, view)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await sync.stop()
    assert [n.seq for n in racing.before] == [3, 4]  # in the snapshot: not applied again
    assert view.snapshot_seq == 4
    assert view.applied == [n.seq for n in racing.after] == [5, 6]  # after it: applied once
    assert view.hashes == await truth(sync)


async def test_a_consumer_started_at_any_moment_ends_with_the_truth(store: SqlStore) -> None:
    inv = Inventory()
    registry = registry_of(**{TYPE: (Listed, inv)})
    bus = LocalBus()
    producer = Synchronizer(store, bus, registry, FakeClock())
    other = Synchronizer(store, bus, registry, FakeClock())  # a second sampler of the type
    rng = random.Random(4)
    views = [View() for _ in range(6)]
    consumers: list[asyncio.Task[None]] = []
    try:
        for step in range(60):
            pid = f"e{rng.randrange(12)}"
            if pid in inv.things and rng.random() < 0.3:
                del inv.things[pid]
            else:
                inv.put(pid, v=rng.randrange(3))
            sampling = [producer.sample_once(TYPE), other.sample_once(TYPE)]
            if step % 10 == 5:
                view = views[len(consumers)]
                consumers.append(
                    asyncio.create_task(
                        consume(producer, TYPE, view.apply_snapshot, view.apply_change)
                    )
                )
            await asyncio.gather(*sampling)
            await asyncio.sleep(0)
        for view in views[: len(consumers)]:
            await caught_up(producer, view)
            assert view.snapshot_seq is not None
            assert len(view.applied) == len(set(view.applied))
            assert all(seq > view.snapshot_seq for seq in view.applied)
            last = await producer.entities.sequence(TYPE)
            # together, snapshot and applied changes account for every change exactly once
            assert sorted(view.applied) == list(range(view.snapshot_seq + 1, last + 1))
    finally:
        for task in consumers:
            task.cancel()
        await asyncio.gather(*consumers, return_exceptions=True)
        await producer.stop()
        await other.stop()


def note(seq: int, pid: str = "a") -> ChangeNotification:
    return ChangeNotification(TYPE, pid, ChangeKind.CHANGED, seq, {"v": seq}, str(seq), 0.0)


def test_the_filter_drops_old_duplicate_and_overtaken_notifications() -> None:
    changes = ChangeFilter(Snapshot([], {TYPE: 5}))
    assert not changes.is_new(note(5))  # in the snapshot
    assert changes.is_new(note(7))
    assert not changes.is_new(note(7))  # delivered twice
    assert not changes.is_new(note(6))  # overtaken by 7 for the same entity
    assert changes.is_new(note(6, "b"))  # another entity: still new
    assert changes.is_new(ChangeNotification("Other", "a", ChangeKind.GONE, 1, None, None, 0.0))


async def test_subscriptions_end_when_the_synchronizer_stops(store: SqlStore) -> None:
    sync = Synchronizer(
        store,
        LocalBus(),
        registry_of(**{TYPE: (Listed, Inventory())}),
        FakeClock(),
        EngineSettings(),
    )
    view = View()
    task = asyncio.create_task(consume(sync, TYPE, view.apply_snapshot, view.apply_change))
    await asyncio.sleep(0.05)
    await sync.stop()
    with pytest.raises(RuntimeError, match="the synchronizer stopped"):
        await asyncio.wait_for(task, 5)
