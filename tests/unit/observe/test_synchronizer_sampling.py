"""Samplers: snapshots and observation, watch hints, two samplers, a hanging plugin, status."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from observe_support import (
    FakeClock,
    Hanging,
    Inventory,
    Listed,
    Observed,
    Pushed,
    add_managed,
    registry_of,
)

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore
from converge.engine.settings import EngineSettings
from converge.messages import ChangeKind, ChangeNotification
from converge.observe import Synchronizer
from converge.resources.registry import PluginRegistry

SETTINGS = EngineSettings(observe_interval=60.0, observe_timeout=5.0)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    store = SqlStore.open(f"sqlite:///{tmp_path}/state.db")
    yield store
    await store.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def bus() -> LocalBus:
    return LocalBus()


def kinds(notes: list[ChangeNotification]) -> list[tuple[str, str, int]]:
    return [(n.physical_id, str(n.kind), n.seq) for n in sorted(notes, key=lambda n: n.seq)]


async def make(
    store: SqlStore, bus: LocalBus, registry: PluginRegistry, clock: FakeClock
) -> Synchronizer:
    return Synchronizer(store, bus, registry, clock, SETTINGS)


async def test_snapshot_type_reports_appeared_changed_gone_with_growing_seq(
    store: SqlStore, bus: LocalBus, clock: FakeClock
) -> None:
    inv = Inventory()
    sync = await make(store, bus, registry_of(**{"T::Listed": (Listed, inv)}), clock)
    inv.put("a", size=1)
    inv.put("b", size=2)
    assert kinds(await sync.sample_once()) == [("a", "appeared", 1), ("b", "appeared", 2)]
    assert await sync.sample_once() == []  # nothing changed: nothing said
    inv.put("a", size=1)  # only the volatile mtime moved: the essence is equal
    assert await sync.sample_once("T::Listed") == []
    inv.put("a", size=10)
    del inv.things["b"]
    inv.put("c", size=3)
    notes = await sync.sample_once()
    assert kinds(notes) == [("a", "changed", 3), ("c", "appeared", 4), ("b", "gone", 5)]
    changed = next(n for n in notes if n.physical_id == "a")
    assert changed.essence == {"size": 10} and changed.stack_id is None
    snapshot = await sync.get_all("T::Listed")
    assert snapshot.seq == 5
    assert {(e.physical_id, e.essence["size"], e.is_managed) for e in snapshot.entities} == {
        ("a", 10, False),
        ("c", 3, False),
    }
    assert {e.physical_id: e.seq for e in snapshot.entities} == {"a": 3, "c": 4}


async def test_managed_entities_carry_their_owner_and_unmanaged_ones_are_marked(
    store: SqlStore, bus: LocalBus, clock: FakeClock
) -> None:
    inv = Inventory()
    sync = await make(store, bus, registry_of(**{"T::Listed": (Listed, inv)}), clock)
    inv.put("stray", size=0)
    await sync.sample_once()
    ids = await add_managed(store, "app", {"web": ("T::Listed", "web-1")})
    inv.put("web-1", size=1)
    notes = await sync.sample_once()
    assert kinds(notes) == [("web-1", "appeared", 2)]
    assert (notes[0].stack_id, notes[0].resource_id, notes[0].resource_name) == (
        ids["web"][0],
        ids["web"][1],
        "web",
    )
    snapshot = await sync.get_all(None)
    managed = {e.physical_id: e.is_managed for e in snapshot.entities}
    assert managed == {"stray": False, "web-1": True}
    assert snapshot.seq_of("T::Listed") == 2


async def test_observe_only_type_sees_managed_entities_and_survives_a_broken_one(
    store: SqlStore, bus: LocalBus, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    inv = Inventory()
    sync = await make(store, bus, registry_of(**{"T::Observed": (Observed, inv)}), clock)
    await add_managed(store, "app", {"x": ("T::Observed", "x-1"), "y": ("T::Observed", "y-1")})
    inv.put("x-1", v=1)
    inv.put("y-1", v=1)
    inv.put("invisible", v=1)  # no list_all and no stack: the type cannot show it
    assert kinds(await sync.sample_once()) == [("x-1", "appeared", 1), ("y-1", "appeared", 2)]
    assert ("observe", "invisible") not in inv.calls
    inv.broken.add("y-1")  # reading y fails: y is neither changed nor gone
    inv.put("x-1", v=2)
    with caplog.at_level(logging.WARNING, logger="converge.observe"):
        assert kinds(await sync.sample_once()) == [("x-1", "changed", 3)]
    status = sync.status()["T::Observed"]
    assert status.last_error == "RuntimeError: cannot read y-1" and not status.stalled
    assert "cannot read y-1" in caplog.text
    inv.broken.clear()
    del inv.things["y-1"]
    assert kinds(await sync.sample_once()) == [("y-1", "gone", 4)]
    assert sync.status()["T::Observed"].last_error is None


async def test_entities_of_a_deleted_stack_leave_an_observe_only_type(
    store: SqlStore, bus: LocalBus, clock: FakeClock
) -> None:
    inv = Inventory()
    sync = await make(store, bus, registry_of(**{"T::Observed": (Observed, inv)}), clock)
    ids = await add_managed(store, "app", {"x": ("T::Observed", "x-1")})
    inv.put("x-1", v=1)
    await sync.sample_once()
    await store.mark_stack_deleted(ids["x"][0])
    notes = await sync.sample_once()
    assert kinds(notes) == [("x-1", "gone", 2)]
    assert notes[0].resource_name == "x"


async def test_two_samplers_over_one_type_publish_each_change_once(
    store: SqlStore, bus: LocalBus, clock: FakeClock, tmp_path: Path
) -> None:
    inv = Inventory()
    registry = registry_of(**{"T::Listed": (Listed, inv)})
    other_store = SqlStore.open(f"sqlite:///{tmp_path}/state.db")  # a second process, as it were
    first, second = (
        await make(store, bus, registry, clock),
        await make(other_store, bus, registry, clock),
    )
    received: list[ChangeNotification] = []
    try:
        async with first.subscribe("T::Listed") as subscription:
            for round_ in range(5):
                inv.put(f"e{round_}", v=round_)
                if round_:
                    inv.put(f"e{round_ - 1}", v=-round_)
                published = await asyncio.gather(
                    first.sample_once(), second.sample_once(), first.sample_once()
                )
                assert sum(len(p) for p in published) == (1 if round_ == 0 else 2)
            while subscription.pending():
                received.append(await anext(subscription))
    finally:
        await other_store.close()
        await first.stop()
        await second.stop()
    assert [n.seq for n in received] == list(range(1, 10))
    assert len({(n.physical_id, n.hash) for n in received}) == 9


async def test_watch_hints_are_observed_between_polls(
    store: SqlStore, bus: LocalBus, clock: FakeClock
) -> None:
    inv = Inventory()
    sync = await make(store, bus, registry_of(**{"T::Pushed": (Pushed, inv)}), clock)
    await add_managed(store, "app", {"x": ("T::Pushed", "x-1"), "y": ("T::Pushed", "y-1")})
    inv.put("x-1", v=1)
    inv.put("y-1", v=1)
    async with sync.subscribe("T::Pushed") as subscription:
        await sync.start()
        try:
            first = [await anext(subscription), await anext(subscription)]
            assert {n.physical_id for n in first} == {"x-1", "y-1"}
            assert sync.status()["T::Pushed"].pushing
            observed_before = len([c for c in inv.calls if c[0] == "observe"])
            inv.put("x-1", v=2)
            inv.push("x-1")  # the interval (60 s on a clock that stands still) never elapses
            note = await asyncio.wait_for(anext(subscription), 5)
            assert (note.physical_id, note.kind, note.essence) == ("x-1", "changed", {"v": 2})
            # only the hinted entity was observed
            observed = [c for c in inv.calls if c[0] == "observe"][observed_before:]
            assert observed == [("observe", "x-1")]
            status = sync.status()["T::Pushed"]
            assert status.passes == 2 and status.heartbeat == clock.now()
        finally:
            await sync.stop()
    assert not sync.status()["T::Pushed"].pushing


async def test_polling_follows_the_interval_of_the_injected_clock(
    store: SqlStore, bus: LocalBus, clock: FakeClock
) -> None:
    inv = Inventory()
    settings = EngineSettings(observe_interval=60.0, observe_intervals={"T::Listed": 10.0})
    sync = Synchronizer(store, bus, registry_of(**{"T::Listed": (Listed, inv)}), clock, settings)
    assert sync.status()["T::Listed"].interval == 10.0
    async with sync.subscribe("T::Listed") as subscription:
        await sync.start()
        try:
            await asyncio.wait_for(_passes(sync, "T::Listed", 1), 5)
            inv.put("a", v=1)
            await clock.advance(9.0)
            assert subscription.pending() == 0
            await clock.advance(1.0)
            note = await asyncio.wait_for(anext(subscription), 5)
            assert (note.physical_id, note.kind) == ("a", ChangeKind.APPEARED)
        finally:
            await sync.stop()


async def _passes(sync: Synchronizer, type_name: str, count: int) -> None:
    while sync.status()[type_name].passes < count:
        await asyncio.sleep(0.01)


async def _called(inventory: Inventory, call: str, timeout: float = 5.0) -> None:
    """Wait until the plugin was asked (a pass reads the store first, which takes real
    time: advancing the fake clock before the call would start its timeout too late)."""

    async def asked() -> None:
        while not any(name == call for name, _ in inventory.calls):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.01)  # the timeout's timer starts right after the call

    await asyncio.wait_for(asked(), timeout)


async def test_a_hanging_plugin_is_stopped_by_its_timeout_and_the_rest_goes_on(
    store: SqlStore, bus: LocalBus, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    stuck, fine = Inventory(), Inventory()
    registry = registry_of(**{"T::Hanging": (Hanging, stuck), "T::Listed": (Listed, fine)})
    sync = await make(store, bus, registry, clock)
    fine.put("a", v=1)
    with caplog.at_level(logging.WARNING, logger="converge.observe"):
        sampling = asyncio.create_task(sync.sample_once())
        await asyncio.wait_for(_passes(sync, "T::Listed", 1), 5)  # not held up by the other
        await _called(stuck, "list_all")
        assert not sampling.done()
        await clock.advance(5.0)
        notes = await asyncio.wait_for(sampling, 5)
    assert kinds(notes) == [("a", "appeared", 1)]
    status = sync.status()["T::Hanging"]
    assert status.stalled and status.failures == 1 and status.passes == 0
    assert status.last_error is not None
    assert "T::Hanging: list_all did not finish within 5 s" in status.last_error
    assert "list_all did not finish" in caplog.text
    assert sync.status()["T::Listed"].is_healthy
    stuck.release.set()  # the plugin answers again: the next pass clears the stall
    await sync.sample_once("T::Hanging")
    assert sync.status()["T::Hanging"].is_healthy


async def test_a_sampler_loop_survives_a_hanging_plugin(
    store: SqlStore, bus: LocalBus, clock: FakeClock
) -> None:
    stuck = Inventory()
    sync = Synchronizer(
        store,
        bus,
        registry_of(**{"T::Hanging": (Hanging, stuck)}),
        clock,
        EngineSettings(observe_interval=10.0, observe_timeout=5.0),
    )
    await sync.start()
    try:
        await _called(stuck, "list_all")
        assert sync.status()["T::Hanging"].passes == 0 and not sync.status()["T::Hanging"].stalled
        await clock.advance(5.0)

        async def stalled() -> None:
            while not sync.status()["T::Hanging"].stalled:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(stalled(), 5)
        stuck.release.set()
        await clock.advance(5.0)
        await asyncio.wait_for(_passes(sync, "T::Hanging", 1), 5)
        assert not sync.status()["T::Hanging"].stalled
    finally:
        await sync.stop()


async def test_unknown_type_is_named(store: SqlStore, bus: LocalBus, clock: FakeClock) -> None:
    sync = await make(store, bus, registry_of(**{"T::Listed": (Listed, Inventory())}), clock)
    with pytest.raises(Exception, match="no sampler for resource type 'T::Nope'; known: T::Listed"):
        await sync.sample_once("T::Nope")
