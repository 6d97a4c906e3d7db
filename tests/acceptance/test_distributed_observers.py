"""Observers at scale: several synchronizers over one PostgreSQL database and one RabbitMQ
namespace divide the resource types between them, publish each change once, and a
survivor covers a dead one's share with its first full sample."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from converge.api import Converge
from converge.core import shard
from converge.messages import ChangeNotification
from converge.records import ServiceRecord
from converge.resources.builtin.world import TestWorld
from support.engines import fast, two_engines
from support.world import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

OBSERVING = ("engine", "worker", "observer")

TYPE = "OS::Heat::TestResource"
TEMPLATE = f"""
heat_template_version: 2021-04-16
resources:
  test: {{type: {TYPE}, properties: {{value: hello}}}}
"""


@contextlib.asynccontextmanager
async def notifications_of(sync: Any, type_name: str) -> AsyncIterator[list[ChangeNotification]]:
    """Every change notification of ``type_name`` published while the block runs."""
    seen: list[ChangeNotification] = []
    subscription = await sync.subscribe(type_name).open()

    async def collect() -> None:
        async for notification in subscription:
            seen.append(notification)

    task = asyncio.create_task(collect())
    try:
        yield seen
    finally:
        subscription.close()
        await task


async def physical_id(cv: Converge, stack: str) -> str:
    (resource,) = await cv.list_resources(stack)
    assert resource.physical_resource_id
    return resource.physical_resource_id


async def test_observers_divide_the_types_and_publish_a_change_once(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path
) -> None:
    settings = fast(tmp_path, observe_interval=0.1)
    world = TestWorld(tmp_path / "world.db")
    async with (
        two_engines(postgres_url, rabbitmq_url, settings, roles=OBSERVING) as (first, second, _),
        first.serving() as one,
        second.serving() as other,
    ):

        async def both_see_both() -> bool:
            views = (one.membership.observers, other.membership.observers)
            return views[0] == views[1] and len(views[0]) == 2

        await eventually(both_see_both)
        types = set(one.status())
        owned = [{t for t in types if sync.membership.owns(t)} for sync in (one, other)]
        assert owned[0] | owned[1] == types and not owned[0] & owned[1]
        owner = one if TYPE in owned[0] else other
        bystander = other if owner is one else one
        await asyncio.sleep(0.3)  # a pass begun before the other joined has ended
        bystander_passes = bystander.status()[TYPE].passes

        await first.create_stack("s", TEMPLATE)
        pid = await physical_id(first, "s")

        async def appeared() -> bool:  # in the baseline: what follows is a change of it
            return any(e.physical_id == pid for e in (await one.get_all(TYPE)).entities)

        await eventually(appeared)
        async with notifications_of(one, TYPE) as seen:
            world.set_property(TYPE, pid, "value", "tampered")

            async def changed() -> bool:
                return any(n.physical_id == pid and n.kind == "changed" for n in seen)

            await eventually(changed)
            await asyncio.sleep(0.5)  # both observers keep sampling: still one change
        assert [n.kind for n in seen if n.physical_id == pid] == ["changed"]
        # Since both know each other, only the owner's sampler of the type runs passes.
        assert bystander.status()[TYPE].passes == bystander_passes
        assert owner.status()[TYPE].passes > 0

        # The owner is gone (its row removed, as for a process of this host found dead):
        # the other takes the type over at its next refresh, and its first full pass sees
        # what changed meanwhile.
        assert owner.membership.observer_id is not None
        await first.engine.ctx.store.remove_service(owner.membership.observer_id)
        await owner.stop()
        async with notifications_of(bystander, TYPE) as seen:
            world.set_property(TYPE, pid, "value", "again")

            async def taken_over() -> bool:
                return any(n.physical_id == pid for n in seen)

            await eventually(taken_over)
        assert bystander.membership.observers == {bystander.membership.observer_id}


async def test_a_dead_observers_share_is_sampled_by_a_survivor(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path
) -> None:
    """A third observer (a service row) owns the type and dies with a change unseen: once
    its heartbeat is stale, the first full sample of the survivor that gains the type finds
    the change, and the engines record the drift."""
    settings = fast(tmp_path, observe_interval=0.1)
    world = TestWorld(tmp_path / "world.db")
    async with (
        two_engines(postgres_url, rabbitmq_url, settings, roles=OBSERVING) as (first, second, _),
        first.serving() as one,
        second.serving() as other,
    ):
        store = first.engine.ctx.store
        survivors = {first.engine.engine_id, second.engine.engine_id}
        ghost = next(
            candidate
            for candidate in (str(uuid.uuid4()) for _ in range(100_000))
            if shard.owner(TYPE, survivors | {candidate}) == candidate
        )
        now = time.time()
        await store.register_service(ServiceRecord(ghost, "elsewhere", 1, ("observer",), now, now))
        for sync in (one, other):
            await sync.membership.refresh()
            assert not sync.membership.owns(TYPE)

        await first.create_stack("s", TEMPLATE)
        pid = await physical_id(first, "s")
        async with notifications_of(one, TYPE) as seen:
            world.set_property(TYPE, pid, "value", "tampered")
            await asyncio.sleep(0.5)
            assert not [n for n in seen if n.physical_id == pid]  # its owner is the ghost

            await store.heartbeat(ghost, now - settings.engine_stale_after - 1)  # it died

            async def noticed() -> bool:
                return any(n.physical_id == pid for n in seen)

            await eventually(noticed)
        assert [sync.membership.owns(TYPE) for sync in (one, other)].count(True) == 1

        async def drift_recorded() -> bool:
            (drift,) = await first.drift("s")
            return drift.drift_status == "MODIFIED"

        await eventually(drift_recorded)
