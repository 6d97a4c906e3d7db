"""Drift handling fed by a fake notification source (no synchronizer): the engine's policy."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from converge.api import Converge
from converge.core.heal import HealPolicy
from converge.engine.settings import EngineSettings
from converge.resources.builtin.testresource import HeatTestResource
from converge.resources.builtin.world import TestWorld, world_path_for
from support.world import eventually, paused_at

TEMPLATE = """
heat_template_version: 2021-04-16
resources:
  test: {type: OS::Heat::TestResource, properties: {value: hello}}
  other: {type: OS::Heat::Value, properties: {value: calm}}
"""


class FakeClock:
    def __init__(self) -> None:
        self.time = 1000.0

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.time += max(0.0, seconds)


@dataclass(frozen=True)
class Note:
    """What a ChangeNotification carries that the engine reads."""

    physical_id: str
    kind: str
    essence: Mapping[str, Any] | None
    stack_id: str | None
    resource_id: int | None
    observed_at: float = 0.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def cv(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Converge]:
    settings = EngineSettings(
        sweep_interval=0.1,
        heartbeat_interval=0.5,
        heal_policy=HealPolicy(base_delay=10, factor=2, max_attempts=2, stable_after=1000),
    )
    async with Converge.embedded(tmp_path / "state.db", settings=settings) as handle:
        handle.engine.ctx.clock = clock  # heal timing on a fake clock
        yield handle


@pytest.fixture
def world(tmp_path: Path) -> TestWorld:
    return TestWorld(world_path_for(tmp_path / "state.db"))


async def note_for(cv: Converge, name: str, essence: Mapping[str, Any] | None) -> Note:
    row = {r.resource_name: r for r in await cv.list_resources("s")}[name]
    stack = await cv.get_stack("s")
    kind = "gone" if essence is None else "changed"
    now = cv.engine.ctx.clock.now()  # observed now, on the engine's (fake) clock
    return Note(row.physical_resource_id, kind, essence, stack.id, row.id, now)


async def drift_of(cv: Converge, name: str) -> str:
    return {d.resource_name: d.drift_status for d in await cv.drift("s")}[name]


async def test_unmanaged_and_stale_notifications_are_ignored(cv: Converge) -> None:
    await cv.create_stack("s", TEMPLATE, drift_policy="heal")
    handler = cv.engine.drift
    await handler.apply_change(Note("x", "changed", {"value": "1"}, None, None))
    stale = await note_for(cv, "test", {"value": "tampered"})
    await handler.apply_change(
        Note("someone-else", "changed", {}, stale.stack_id, stale.resource_id)
    )
    assert await drift_of(cv, "test") == "NOT_CHECKED"
    assert (await cv.get_stack("s")).stack_status == "CREATE_COMPLETE"


async def test_notify_records_once_and_resolves(cv: Converge) -> None:
    await cv.create_stack("s", TEMPLATE)
    handler = cv.engine.drift
    note = await note_for(cv, "test", {"value": "tampered", "update_replace_value": None})
    await handler.apply_change(note)
    await handler.apply_change(note)  # the same drift again: no second event
    assert await drift_of(cv, "test") == "MODIFIED"
    events = [e.resource_status_reason for e in await cv.list_events("s", resource_name="test")]
    assert sum("Drift found" in r for r in events) == 1
    assert (await cv.get_stack("s")).stack_status == "CREATE_COMPLETE"
    await handler.apply_change(await note_for(cv, "test", {"value": "hello"}))
    assert await drift_of(cv, "test") == "IN_SYNC"
    events = [e.resource_status_reason for e in await cv.list_events("s", resource_name="test")]
    assert events[-1] == "Drift resolved: reality matches again"


async def test_ignore_policy_records_nothing(cv: Converge) -> None:
    await cv.create_stack("s", TEMPLATE, drift_policy="ignore")
    await cv.engine.drift.apply_change(await note_for(cv, "test", None))
    assert await drift_of(cv, "test") == "NOT_CHECKED"


async def test_heal_corrects_only_the_drifted_resource(cv: Converge, world: TestWorld) -> None:
    await cv.create_stack("s", TEMPLATE, drift_policy="heal")
    pid = (await note_for(cv, "test", {})).physical_id
    world.set_property("OS::Heat::TestResource", pid, "value", "tampered")
    await cv.engine.drift.apply_change(await note_for(cv, "test", {"value": "tampered"}))
    stack = await cv.wait("s")
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    stack_reasons = [e.resource_status_reason for e in await cv.list_events("s", resource_name="s")]
    assert "Stack UPDATE started to heal drift of test" in stack_reasons
    assert world.get("OS::Heat::TestResource", pid)["properties"]["value"] == "hello"
    other = [e.resource_status for e in await cv.list_events("s", resource_name="other")]
    assert other == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert await drift_of(cv, "test") == "IN_SYNC"


async def test_heal_backs_off_then_gives_up(
    cv: Converge, world: TestWorld, clock: FakeClock
) -> None:
    await cv.create_stack("s", TEMPLATE, drift_policy="heal")
    handler = cv.engine.drift
    pid = (await note_for(cv, "test", {})).physical_id

    async def drift_again() -> None:
        world.set_property("OS::Heat::TestResource", pid, "value", "theirs")
        await handler.apply_change(await note_for(cv, "test", {"value": "theirs"}))
        await cv.wait("s")

    def heals() -> int:
        return sum(r.startswith("Healing drift") for r in reasons)

    await drift_again()  # heal 1, at once
    reasons = [e.resource_status_reason for e in await cv.list_events("s", resource_name="test")]
    assert heals() == 1
    await drift_again()  # within the backoff: recorded, not healed
    reasons = [e.resource_status_reason for e in await cv.list_events("s", resource_name="test")]
    assert heals() == 1 and await drift_of(cv, "test") == "MODIFIED"
    clock.time += 10  # backoff over: the level-triggered pass heals it
    await handler.recheck()
    await cv.wait("s")
    reasons = [e.resource_status_reason for e in await cv.list_events("s", resource_name="test")]
    assert heals() == 2
    clock.time += 100
    await drift_again()  # a third drift after two heals: given up
    resource = {r.resource_name: r for r in await cv.list_resources("s")}["test"]
    assert resource.resource_status == "UPDATE_FAILED"
    assert "Drift not healed: drift came back after 2 heals" in resource.resource_status_reason
    assert world.get("OS::Heat::TestResource", pid)["properties"]["value"] == "theirs"


SLOW = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
resources:
  slow:
    type: OS::Heat::TestResource
    properties: {value: {get_param: v}}
  test: {type: OS::Heat::TestResource, properties: {value: hello}}
  other: {type: OS::Heat::Value, properties: {value: calm}}
"""


PAUSE_SLOW = "resource_registry: {resources: {slow: {hooks: pre-update}}}\n"


async def test_drift_seen_while_busy_is_healed_in_one_heal(cv: Converge, world: TestWorld) -> None:
    await cv.create_stack("s", SLOW, drift_policy="heal")
    handler = cv.engine.drift
    test, other = (await note_for(cv, "test", {})), (await note_for(cv, "other", {}))
    world.set_property("OS::Heat::TestResource", test.physical_id, "value", "tampered")
    world.remove("OS::Heat::Value", other.physical_id)
    await cv.update_stack("s", SLOW, environments=[PAUSE_SLOW], parameters={"v": "two"}, wait=False)
    await eventually(lambda: paused_at(cv, "s", "slow", "pre-update"))
    # Both seen while the update runs: judged only once the stack settles.
    await handler.apply_change(await note_for(cv, "test", {"value": "tampered"}))
    await handler.apply_change(await note_for(cv, "other", None))
    await cv.clear_hook("s", "slow", "pre-update")
    assert (await cv.wait("s")).stack_status == "UPDATE_COMPLETE"
    assert {await drift_of(cv, "test"), await drift_of(cv, "other")} <= {"IN_SYNC", "NOT_CHECKED"}

    await handler.recheck()
    assert (await cv.wait("s")).stack_status == "UPDATE_COMPLETE"
    starts = [
        e.resource_status_reason
        for e in await cv.list_events("s", resource_name="s")
        if "to heal drift" in e.resource_status_reason
    ]
    assert starts == ["Stack UPDATE started to heal drift of other, test"]
    assert world.get("OS::Heat::TestResource", test.physical_id)["properties"]["value"] == "hello"


async def test_serve_heals_drift_that_comes_together_in_one_heal(
    cv: Converge, world: TestWorld
) -> None:
    # As under `converge serve`: heals wait heal_gather_window for more of the stack's drift.
    await cv.create_stack("s", TEMPLATE, drift_policy="heal")
    handler = cv.engine.drift
    test, other = (await note_for(cv, "test", {})), (await note_for(cv, "other", {}))
    world.set_property("OS::Heat::TestResource", test.physical_id, "value", "tampered")
    world.remove("OS::Heat::Value", other.physical_id)
    gathering = asyncio.create_task(handler.heal_when_asked(), name="test-heal-when-asked")
    try:
        await asyncio.sleep(0)
        await handler.apply_change(await note_for(cv, "test", {"value": "tampered"}))
        await handler.apply_change(await note_for(cv, "other", None))

        async def healed() -> bool:
            stack = await cv.get_stack("s")
            return stack.stack_status == "UPDATE_COMPLETE"

        await eventually(healed)
    finally:
        gathering.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gathering
    starts = [
        e.resource_status_reason
        for e in await cv.list_events("s", resource_name="s")
        if "to heal drift" in e.resource_status_reason
    ]
    assert starts == ["Stack UPDATE started to heal drift of other, test"]


async def test_a_change_read_late_by_an_early_pass_is_not_lost(
    cv: Converge, world: TestWorld, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Observations overlap: a sampler pass began (t=1005) before a direct look (t=1010)
    that read reality before it was tampered, but the pass read it after. The pass's
    notification is older by its start and is not applied; the sampler's baseline now holds
    the tampered state, so no sampler will say it again. A direct look must find it."""
    await cv.create_stack("s", TEMPLATE)  # notify: only the notification would say it
    handler = cv.engine.drift
    in_sync = await note_for(cv, "test", {"value": "hello", "update_replace_value": None})
    await handler.apply_change(dataclasses.replace(in_sync, observed_at=1010.0))
    assert await drift_of(cv, "test") == "IN_SYNC"
    world.set_property("OS::Heat::TestResource", in_sync.physical_id, "value", "tampered")
    late = await note_for(cv, "test", {"value": "tampered", "update_replace_value": None})
    await handler.apply_change(dataclasses.replace(late, observed_at=1005.0))
    assert await drift_of(cv, "test") == "IN_SYNC"  # not applied: began before the look
    clock.time = 1020.0
    # The first direct look fails (a plugin error): the next pass looks again.
    observe = HeatTestResource.observe
    failures = iter([RuntimeError("flaky reality")])

    async def flaky(self: HeatTestResource, *args: Any) -> Any:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return await observe(self, *args)

    monkeypatch.setattr(HeatTestResource, "observe", flaky)
    await handler.recheck()
    assert await drift_of(cv, "test") == "IN_SYNC"
    await handler.recheck()
    assert await drift_of(cv, "test") == "MODIFIED"
