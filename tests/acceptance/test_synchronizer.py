"""The synchronizer over a real engine: a stack's resources are sampled, out-of-band changes
reach a consumer as notifications naming the stack resource, a deleted stack's entities go."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from converge.api import Converge
from converge.engine.clock import SystemClock
from converge.engine.settings import EngineSettings
from converge.messages import ChangeKind, ChangeNotification
from converge.observe import Snapshot, Synchronizer, consume
from converge.resources.base import ObserverContext
from converge.resources.registry import PluginRegistry
from support.world import Reality, WorldThing, eventually

TEMPLATE = """
heat_template_version: 2021-04-16
resources:
  db:
    type: Test::Thing
    properties: {value: one}
  web:
    type: Test::Thing
    properties: {value: two}
"""


def synchronizer(cv: Converge, registry: PluginRegistry) -> Synchronizer:
    ctx = cv.engine.ctx
    settings = EngineSettings(observe_interval=0.05, observe_timeout=2.0)
    return Synchronizer(ctx.store, ctx.bus, registry, SystemClock(), settings)


async def test_out_of_band_changes_reach_a_consumer(
    cv: Converge, reality: Reality, registry: PluginRegistry
) -> None:
    await cv.create_stack("app", TEMPLATE)
    sync = synchronizer(cv, registry)
    snapshots: list[Snapshot] = []
    changes: list[ChangeNotification] = []

    async def on_snapshot(snapshot: Snapshot) -> None:
        snapshots.append(snapshot)

    async def on_change(note: ChangeNotification) -> None:
        changes.append(note)

    await sync.sample_once("Test::Thing")
    consumer = asyncio.create_task(consume(sync, "Test::Thing", on_snapshot, on_change))
    await sync.start()
    try:
        await eventually(lambda: _true(bool(snapshots)))
        by_name = {e.resource_name: e for e in snapshots[0].entities}
        assert {name: e.essence["value"] for name, e in by_name.items()} == {
            "db": "one",
            "web": "two",
        }
        web_id = next(iter(reality.by_name("web")))
        assert by_name["web"].physical_id == web_id and by_name["web"].is_managed
        reality.things[web_id]["value"] = "changed behind converge's back"
        await eventually(lambda: _true(len(changes) == 1))
        assert (changes[0].kind, changes[0].resource_name, changes[0].physical_id) == (
            ChangeKind.CHANGED,
            "web",
            web_id,
        )
        assert changes[0].essence is not None
        assert changes[0].essence["value"] == "changed behind converge's back"
        await cv.delete_stack("app")
        await eventually(lambda: _true(len(changes) == 3))
        assert {(n.kind, n.resource_name) for n in changes[1:]} == {
            (ChangeKind.GONE, "db"),
            (ChangeKind.GONE, "web"),
        }
        assert all(s.is_healthy for s in sync.status().values())
    finally:
        consumer.cancel()
        await asyncio.gather(consumer, return_exceptions=True)
        await sync.stop()


async def _true(value: bool) -> bool:
    return value


async def test_a_listing_type_shows_unmanaged_entities_too(
    cv: Converge, reality: Reality, registry: PluginRegistry
) -> None:
    class ListedThing(WorldThing):
        def __init__(self) -> None:
            super().__init__(reality)

        async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
            return {
                pid: {k: v for k, v in props.items() if k != "__name__"}
                for pid, props in reality.things.items()
            }

    registry.register(ListedThing, type_name="Test::ListedThing")
    await cv.create_stack("app", TEMPLATE.replace("Test::Thing", "Test::ListedThing"))
    reality.things["stray-1"] = {"value": "made by hand", "__name__": "stray"}
    sync = synchronizer(cv, registry)
    try:
        await sync.sample_once()
        snapshot = await sync.get_all("Test::ListedThing")
        managed = {e.physical_id: e.resource_name for e in snapshot.entities}
        assert managed.pop("stray-1") is None
        assert sorted(managed.values()) == ["db", "web"]
        assert snapshot.seq == 3
    finally:
        await sync.stop()
