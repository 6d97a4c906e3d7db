"""converge serve's drift handling: heal, notify and ignore, and a flapping resource."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from converge.api import Converge
from converge.core.heal import HealPolicy
from converge.engine.settings import EngineSettings
from converge.resources.builtin.world import TestWorld, world_path_for
from support.world import eventually

TEMPLATE = """
heat_template_version: 2021-04-16
resources:
  test: {type: OS::Heat::TestResource, properties: {value: hello}}
  val: {type: OS::Heat::Value, properties: {value: v1}}
  other: {type: OS::Heat::TestResource, properties: {value: calm}}
"""

SETTINGS = EngineSettings(
    sweep_interval=0.1,
    heartbeat_interval=0.5,
    drift_recheck_interval=0.05,
    observe_interval=0.05,
    heal_policy=HealPolicy(base_delay=0.05, factor=2.0, max_attempts=3, stable_after=600),
)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Converge, Any, TestWorld]]:
    state = tmp_path / "state.db"
    async with Converge.embedded(state, settings=SETTINGS) as cv, cv.serving() as sync:
        yield cv, sync, TestWorld(world_path_for(state))


async def ids(cv: Converge, stack: str) -> dict[str, str]:
    return {r.resource_name: r.physical_resource_id for r in await cv.list_resources(stack)}


async def reasons(cv: Converge, stack: str, resource: str) -> list[str]:
    return [e.resource_status_reason for e in await cv.list_events(stack, resource_name=resource)]


async def fought_until_given_up(cv: Converge, sync: Any, world: TestWorld, pid: str) -> bool:
    """Another controller sets its own value of ``test`` whenever ours is back: whether
    healing has given up on it (the resource FAILED)."""
    resource = {r.resource_name: r for r in await cv.list_resources("s")}["test"]
    if resource.resource_status.endswith("_FAILED"):
        return True
    live = world.get("OS::Heat::TestResource", pid)
    if live is not None and live["properties"]["value"] == "hello":
        world.set_property("OS::Heat::TestResource", pid, "value", "theirs")
        await sync.sample_once("OS::Heat::TestResource")
    return False


async def test_heal_converges_drift_back(served: tuple[Converge, Any, TestWorld]) -> None:
    cv, sync, world = served
    stack = await cv.create_stack("s", TEMPLATE, drift_policy="heal")
    assert stack.stack_status == "CREATE_COMPLETE"
    before = await ids(cv, "s")
    world.set_property("OS::Heat::TestResource", before["test"], "value", "tampered")
    world.remove("OS::Heat::Value", before["val"])
    await sync.sample_once()

    async def healed() -> bool:
        now = await ids(cv, "s")
        test = world.get("OS::Heat::TestResource", now["test"])
        val = world.get("OS::Heat::Value", now["val"])
        settled = (await cv.get_stack("s")).stack_status == "UPDATE_COMPLETE"
        return (
            settled
            and test is not None
            and val is not None
            and (test["properties"]["value"] == "hello" and val["properties"]["value"] == "v1")
        )

    await eventually(healed)
    test_reasons = await reasons(cv, "s", "test")
    assert any(
        "Drift found: MODIFIED: value wanted 'hello', found 'tampered'" in r for r in test_reasons
    )
    assert any(r.startswith("Healing drift (MODIFIED") for r in test_reasons)
    assert any(r.startswith("Healing drift (DELETED") for r in await reasons(cv, "s", "val"))
    # the resource nobody touched decided nothing
    assert not any("Drift" in r for r in await reasons(cv, "s", "other"))
    other_states = [e.resource_status for e in await cv.list_events("s", resource_name="other")]
    assert other_states == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert (await ids(cv, "s"))["test"] == before["test"]  # corrected in place
    drift = {d.resource_name: d.drift_status for d in await cv.drift("s")}
    assert drift["test"] == "IN_SYNC" and drift["val"] == "IN_SYNC"


async def test_notify_records_drift_without_correcting(
    served: tuple[Converge, Any, TestWorld],
) -> None:
    cv, sync, world = served
    await cv.create_stack("s", TEMPLATE)  # notify is the default
    pid = (await ids(cv, "s"))["test"]
    world.set_property("OS::Heat::TestResource", pid, "value", "tampered")
    await sync.sample_once()

    async def recorded() -> bool:
        return {d.resource_name: d.drift_status for d in await cv.drift("s")}["test"] == "MODIFIED"

    await eventually(recorded)
    detail = {d.resource_name: d.drift_detail for d in await cv.drift("s")}["test"]
    assert detail == {"value": {"wanted": "hello", "found": "tampered"}}
    assert any("not corrected" in r for r in await reasons(cv, "s", "test"))
    assert (await cv.get_stack("s")).stack_status == "CREATE_COMPLETE"
    assert world.get("OS::Heat::TestResource", pid)["properties"]["value"] == "tampered"


async def test_deleted_while_no_synchronizer_ran_is_found(tmp_path: Path) -> None:
    """Gone before the synchronizer's first sample: no baseline says it existed, so no
    sampler can see it go; the engine's recheck observes what was never confirmed."""
    state = tmp_path / "state.db"
    world = TestWorld(world_path_for(state))
    async with Converge.embedded(state, settings=SETTINGS) as cv:
        await cv.create_stack("s", TEMPLATE)  # notify
        pid = (await ids(cv, "s"))["val"]
    world.remove("OS::Heat::Value", pid)
    async with Converge.embedded(state, settings=SETTINGS) as cv, cv.serving():

        async def recorded() -> bool:
            drift = {d.resource_name: d.drift_status for d in await cv.drift("s")}
            return drift == {"other": "IN_SYNC", "test": "IN_SYNC", "val": "DELETED"}

        await eventually(recorded)
        assert any("Drift found: DELETED" in r for r in await reasons(cv, "s", "val"))
        assert (await cv.get_stack("s")).stack_status == "CREATE_COMPLETE"


async def test_ignore_does_nothing(served: tuple[Converge, Any, TestWorld]) -> None:
    cv, sync, world = served
    await cv.create_stack("s", TEMPLATE, drift_policy="ignore")
    pid = (await ids(cv, "s"))["test"]
    world.set_property("OS::Heat::TestResource", pid, "value", "tampered")
    await sync.sample_once()
    await sync.sample_once()
    assert {d.drift_status for d in await cv.drift("s")} == {"NOT_CHECKED"}
    assert (await cv.get_stack("s")).stack_status == "CREATE_COMPLETE"


async def test_flapping_resource_backs_off_and_is_marked_failed(
    served: tuple[Converge, Any, TestWorld],
) -> None:
    cv, sync, world = served
    await cv.create_stack("s", TEMPLATE, drift_policy="heal")
    pid = (await ids(cv, "s"))["test"]

    await eventually(lambda: fought_until_given_up(cv, sync, world, pid), timeout=20)
    resource = {r.resource_name: r for r in await cv.list_resources("s")}["test"]
    assert "giving up" in resource.resource_status_reason
    heals = [r for r in await reasons(cv, "s", "test") if r.startswith("Healing drift")]
    assert len(heals) == SETTINGS.heal_policy.max_attempts
    attempts = [r.rsplit("heal attempt ", 1)[1].rstrip(")") for r in heals]
    assert attempts == ["1", "2", "3"]
    # after giving up, no more heals however often it drifts
    await sync.sample_once()
    await cv.engine.drift.recheck()
    assert len([r for r in await reasons(cv, "s", "test") if r.startswith("Healing")]) == 3
    # The stack says so too, with the reason (show and list read the stack).
    stack = await cv.get_stack("s")
    assert stack.stack_status == "UPDATE_FAILED"
    assert stack.stack_status_reason.startswith("Drift of test not healed: test: Drift not healed")
    assert "giving up" in stack.stack_status_reason
    assert [s.stack_status for s in await cv.list_stacks()] == ["UPDATE_FAILED"]

    # Healing another resource later does not hide it: that heal ends FAILED, same reason.
    other = (await ids(cv, "s"))["other"]
    world.set_property("OS::Heat::TestResource", other, "value", "moved")
    await sync.sample_once()

    async def other_healed() -> bool:
        live = world.get("OS::Heat::TestResource", other)
        heals = [r for r in await reasons(cv, "s", "other") if r.startswith("Healing drift")]
        settled = (await cv.get_stack("s")).stack_status != "UPDATE_IN_PROGRESS"
        return bool(heals and settled and live and live["properties"]["value"] == "calm")

    await eventually(other_healed)
    stack = await cv.get_stack("s")
    assert stack.stack_status == "UPDATE_FAILED"
    assert stack.stack_status_reason.startswith("Drift of test not healed")


SLOW_TEMPLATE = """
heat_template_version: 2021-04-16
resources:
  slow:
    type: OS::Heat::TestResource
    properties: {value: v1, action_wait_secs: {create: 1.5}}
  test: {type: OS::Heat::TestResource, properties: {value: hello}}
  val: {type: OS::Heat::Value, properties: {value: v1}}
"""


async def test_drift_found_during_a_heal_is_healed_as_soon_as_it_ends(tmp_path: Path) -> None:
    # The periodic pass is far away: only the recheck on settling can heal in time.
    settings = dataclasses.replace(SETTINGS, drift_recheck_interval=600)
    state = tmp_path / "state.db"
    async with Converge.embedded(state, settings=settings) as cv, cv.serving() as sync:
        world = TestWorld(world_path_for(state))
        await cv.create_stack("s", SLOW_TEMPLATE, drift_policy="heal")
        before = await ids(cv, "s")
        # Gone: its heal creates it again, which takes 1.5 s (a heal of a changed value
        # would re-apply the same properties at once, without the wait).
        world.remove("OS::Heat::TestResource", before["slow"])
        await sync.sample_once()

        async def busy() -> bool:
            return (await cv.get_stack("s")).stack_status == "UPDATE_IN_PROGRESS"

        try:
            await eventually(busy)
        except AssertionError:
            for e in await cv.list_events("s"):
                print("EV", e.resource_name, e.resource_status, e.resource_status_reason)
            raise
        # While that heal runs (1.5 s), two more drift: seen, but the stack is busy.
        world.set_property("OS::Heat::TestResource", before["test"], "value", "tampered")
        world.remove("OS::Heat::Value", before["val"])
        await sync.sample_once()

        async def healed() -> bool:
            now = await ids(cv, "s")
            test = world.get("OS::Heat::TestResource", now["test"])
            val = world.get("OS::Heat::Value", now["val"])
            settled = (await cv.get_stack("s")).stack_status == "UPDATE_COMPLETE"
            return settled and bool(test and val and test["properties"]["value"] == "hello")

        await eventually(healed, timeout=5)
        starts = [r for r in await reasons(cv, "s", "s") if "to heal drift" in r]
        assert starts[0] == "Stack UPDATE started to heal drift of slow"
        # (Together or apart depends on when each sampler noticed: the settling is the point.)
        assert {name for r in starts[1:] for name in r.rsplit(" of ", 1)[1].split(", ")} == {
            "test",
            "val",
        }


async def test_a_give_up_whose_stack_was_not_told_is_told_at_the_next_pass(
    served: tuple[Converge, Any, TestWorld], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Giving up is two commits (the resource, then the stack): a process stopped between
    them left the stack COMPLETE over a resource left drifted; the next pass says so."""
    cv, sync, world = served
    store = cv.engine.ctx.store
    update_stack = store.update_stack
    stopped: list[str] = []

    async def stops_before_the_stack(stack_id: str, changes: Any, **kwargs: Any) -> Any:
        if not stopped and str(changes.get("status_reason", "")).startswith("Drift of"):
            stopped.append(stack_id)  # as a kill right after the resource's commit
            return None
        return await update_stack(stack_id, changes, **kwargs)

    monkeypatch.setattr(store, "update_stack", stops_before_the_stack)
    await cv.create_stack("s", TEMPLATE, drift_policy="heal")
    pid = (await ids(cv, "s"))["test"]

    await eventually(lambda: fought_until_given_up(cv, sync, world, pid), timeout=20)
    assert len(stopped) == 1

    async def told() -> bool:
        await cv.engine.drift.recheck()
        return (await cv.get_stack("s")).stack_status == "UPDATE_FAILED"

    await eventually(told, timeout=10)
    stack = await cv.get_stack("s")
    assert stack.stack_status_reason.startswith("Drift of test not healed: test: Drift not healed")


async def test_the_recheck_tells_a_stack_of_a_give_up_it_missed(tmp_path: Path) -> None:
    """A resource given up on whose stack was not told (a process stopped in between),
    and no drift notice to come (nothing serving: no synchronizer, no consumer): the
    recheck finds it and the stack says so. It skipped FAILED rows, so only a later notice
    of that stack's drift told it."""
    async with Converge.embedded(tmp_path / "state.db", settings=SETTINGS) as cv:
        await cv.create_stack("s", TEMPLATE, drift_policy="heal")
        store = cv.engine.ctx.store
        stack = await cv.get_stack("s")
        row = next(r for r in await store.list_resources(stack.id) if r.name == "test")
        await store.set_drift(row.id, {"drift_status": "MODIFIED"})
        reason = "Drift not healed: given up after 3 attempts; last found value changed"
        assert await store.update_resource(
            row.id, row.atomic_key, {"status": "FAILED", "status_reason": reason}
        )
        await cv.engine.drift.recheck()
        told = await cv.get_stack("s")
        assert told.stack_status == "CREATE_FAILED"
        assert told.stack_status_reason.startswith("Drift of test not healed: test: " + reason)
