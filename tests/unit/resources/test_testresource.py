"""OS::Heat::TestResource: Heat's waits, failures and replacement rules on a virtual clock."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from converge.errors import PermanentFailure, ReplacementRequired
from converge.resources.base import AppliedState, ResourceContext
from converge.resources.builtin.testresource import HeatTestResource

DEFAULTS: dict[str, Any] = {
    name: schema.default for name, schema in HeatTestResource.properties_schema.items()
}


def props(**overrides: Any) -> dict[str, Any]:
    return {**DEFAULTS, **overrides}


async def created(ctx: ResourceContext, **overrides: Any) -> AppliedState:
    properties = props(**overrides)
    outcome = await HeatTestResource().create(ctx, properties)
    return AppliedState(outcome.physical_id, properties, outcome.data)


async def test_create_stores_value_and_uses_physical_name(ctx: ResourceContext) -> None:
    plugin = HeatTestResource()
    outcome = await plugin.create(ctx, props(value="hello"))
    assert outcome.physical_id == ctx.physical_name
    state = AppliedState(outcome.physical_id, props(value="hello"), outcome.data)
    assert await plugin.attributes(ctx, state, ["output"]) == {"output": "hello"}
    assert plugin.reference_id(state) == ctx.physical_name


async def test_create_without_optional_properties_uses_heat_default(ctx: ResourceContext) -> None:
    outcome = await HeatTestResource().create(ctx, {})
    assert outcome.data == {"value": "test_string"}


async def test_create_waits_wait_secs_on_the_clock(ctx: ResourceContext, clock: Any) -> None:
    await created(ctx, wait_secs=7.5)
    assert clock.now() == 7.5


async def test_action_wait_secs_overrides_wait_secs_per_action(
    ctx: ResourceContext, clock: Any
) -> None:
    state = await created(ctx, wait_secs=2, action_wait_secs={"create": 5, "delete": None})
    assert clock.sleeps == [5]
    await HeatTestResource().delete(ctx, state)  # no delete entry: falls back to wait_secs
    assert clock.sleeps == [5, 2]
    assert clock.now() == 7


async def test_fail_fails_create_after_the_wait(ctx: ResourceContext, clock: Any) -> None:
    with pytest.raises(PermanentFailure, match=r"^Test Resource failed res$"):
        await created(ctx, fail=True, wait_secs=3)
    assert clock.now() == 3


async def test_delete_never_fails(ctx: ResourceContext) -> None:
    state = AppliedState("pid", props(fail=True))
    await HeatTestResource().delete(ctx, state)


async def test_update_of_value_is_in_place_and_waits(ctx: ResourceContext, clock: Any) -> None:
    state = await created(ctx, value="one")
    plugin = HeatTestResource()
    outcome = await plugin.update(ctx, state, props(value="two", action_wait_secs={"update": 4}))
    assert outcome.physical_id == state.physical_id
    assert outcome.data["value"] == "two"
    assert clock.now() == 4


async def test_update_without_value_change_does_not_wait(ctx: ResourceContext, clock: Any) -> None:
    state = await created(ctx)
    outcome = await HeatTestResource().update(ctx, state, props(wait_secs=9, client_name="x"))
    assert clock.now() == 0
    assert outcome.data == state.data


async def test_update_replace_replaces_only_when_value_changes(ctx: ResourceContext) -> None:
    state = await created(ctx, value="one")
    plugin = HeatTestResource()
    with pytest.raises(ReplacementRequired):
        await plugin.update(ctx, state, props(value="two", update_replace=True))
    # Turning update_replace on alone changes nothing that needs replacing.
    outcome = await plugin.update(ctx, state, props(value="one", update_replace=True))
    assert outcome.physical_id == state.physical_id


async def test_changed_update_replace_value_replaces(ctx: ResourceContext) -> None:
    assert not HeatTestResource.properties_schema["update_replace_value"].update_allowed
    state = await created(ctx, update_replace_value="a")
    with pytest.raises(ReplacementRequired):
        await HeatTestResource().update(ctx, state, props(update_replace_value="b"))


async def test_fail_fails_update_after_the_wait(ctx: ResourceContext, clock: Any) -> None:
    state = await created(ctx, value="one")
    with pytest.raises(PermanentFailure, match="Test Resource failed res"):
        await HeatTestResource().update(ctx, state, props(value="two", fail=True, wait_secs=2))
    assert clock.now() == 2


async def test_attributes_wait_attr_wait_secs(ctx: ResourceContext, clock: Any) -> None:
    state = await created(ctx, value="v", attr_wait_secs=1.5)
    assert await HeatTestResource().attributes(ctx, state, ["output"]) == {"output": "v"}
    assert clock.now() == 1.5
    assert await HeatTestResource().attributes(ctx, state, []) == {}
    assert clock.now() == 1.5


async def test_infinite_wait_ends_at_the_deadline_as_a_failure(
    make_context: Any, clock: Any
) -> None:
    ctx = make_context(deadline=30.0)
    with pytest.raises(PermanentFailure, match=r"timed out.*forever"):
        await created(ctx, wait_secs=-1)
    assert clock.now() == 30.0


async def test_wait_longer_than_the_deadline_times_out_at_it(make_context: Any, clock: Any) -> None:
    ctx = make_context(deadline=10.0)
    with pytest.raises(PermanentFailure, match="timed out"):
        await created(ctx, wait_secs=60)
    assert clock.now() == 10.0


async def test_infinite_wait_without_deadline_lasts_until_cancelled(ctx: ResourceContext) -> None:
    task = asyncio.create_task(created(ctx, wait_secs=-1))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_thousand_waiting_resources_share_one_loop(clock: Any, make_context: Any) -> None:
    contexts = [make_context(resource_name=f"r{i}") for i in range(1000)]
    results = await asyncio.gather(*(created(c, wait_secs=1) for c in contexts))
    assert len(results) == 1000
    assert clock.sleeps == [1.0] * 1000
