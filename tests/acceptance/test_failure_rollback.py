"""Failures fail the stack with Heat's reason; rollback converges back; timeouts fire."""

from __future__ import annotations

from pathlib import Path

import pytest

from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.registry import PluginRegistry
from support.templates import FAILING_PAIR as TWO
from support.world import FAST, IN_MEMORY_REALITY, Reality


async def test_failed_create_rolls_back_to_nothing(cv: Converge, reality: Reality) -> None:
    stack = await cv.create_stack("s", TWO, parameters={"fail_b": True})
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert reality.things == {}
    events = [e for e in await cv.list_events("s") if e.resource_name == "s"]
    failed = [e for e in events if e.resource_status == "CREATE_FAILED"]
    assert failed[0].resource_status_reason == (
        "Resource CREATE failed: Error: resources.b: Thing b failed"
    )


async def test_failed_create_without_rollback_stays_failed(cv: Converge, reality: Reality) -> None:
    stack = await cv.create_stack("s", TWO, parameters={"fail_b": True}, disable_rollback=True)
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason == "Resource CREATE failed: Error: resources.b: Thing b failed"
    resources = {r.resource_name: r.resource_status for r in await cv.list_resources("s")}
    assert resources == {"a": "CREATE_COMPLETE", "b": "CREATE_FAILED"}
    # a FAILED resource is replaced by the next update: a new row, made once
    failed_row = {r.resource_name: r.id for r in await cv.list_resources("s")}["b"]
    stack = await cv.update_stack("s", TWO, parameters={"fail_b": False})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert len(reality.actions("create", "b")) == 1
    rows = {r.resource_name: r for r in await cv.list_resources("s")}
    assert rows["b"].id != failed_row
    assert {r.resource_status for r in rows.values()} == {"CREATE_COMPLETE"}


async def test_rollback_mid_update_keeps_originals(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("s", TWO)
    (a_before,) = reality.by_name("a")
    (b_before,) = reality.by_name("b")
    b_value_before = reality.things[b_before]["value"]
    # a is replaced, then b (which now points at the new a) fails: roll back.
    stack = await cv.update_stack(
        "s", TWO, parameters={"a_fixed": "two", "b_value": "two", "fail_b": True}
    )
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert set(reality.things) == {a_before, b_before}
    assert reality.things[b_before]["value"] == b_value_before
    made_by_update = [pid for pid in reality.actions("create", "a") if pid != a_before]
    assert made_by_update and all(pid not in reality.things for pid in made_by_update)
    # no stale "being replaced" marker: an in-place change now applies in place
    stack = await cv.update_stack("s", TWO, parameters={"b_value": "three"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert set(reality.things) == {a_before, b_before}
    assert reality.things[b_before]["value"] == f"{a_before}/three"


async def test_replacement_when_dependency_order_flips(cv: Converge, reality: Reality) -> None:
    first = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing, properties: {fixed: "1", value: {get_attr: [b, id]}}}
  b: {type: Test::Thing, properties: {fixed: "1"}}
"""
    flipped = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing, properties: {fixed: "2"}}
  b: {type: Test::Thing, properties: {fixed: "2", value: {get_attr: [a, id]}}}
"""
    await cv.create_stack("flip", first)
    (old_a,), (old_b,) = reality.by_name("a"), reality.by_name("b")
    stack = await cv.update_stack("flip", flipped)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (new_a,), (new_b,) = reality.by_name("a"), reality.by_name("b")
    assert reality.things[new_b]["value"] == new_a
    log = [(action, pid) for action, _, pid in reality.log]
    # update order from the new template
    assert log.index(("create", new_a)) < log.index(("create", new_b))
    # each old resource deleted only after its replacement exists; old a (which required
    # old b) goes before old b: delete order from the old template
    assert log.index(("create", new_a)) < log.index(("delete", old_a))
    assert log.index(("create", new_b)) < log.index(("delete", old_b))
    assert log.index(("delete", old_a)) < log.index(("delete", old_b))


async def test_plugin_asking_for_replacement_is_replaced(cv: Converge, reality: Reality) -> None:
    template = """
heat_template_version: 2021-04-16
parameters: {v: {type: string}}
resources:
  a: {type: Test::Thing, properties: {value: {get_param: v}, replace_on_update: true}}
"""
    await cv.create_stack("s", template, parameters={"v": "1"})
    (before,) = reality.by_name("a")
    stack = await cv.update_stack("s", template, parameters={"v": "2"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (after,) = reality.by_name("a")
    assert after != before and reality.things[after]["value"] == "2"


async def test_stack_timeout_fires_on_the_engine_clock(cv: Converge, reality: Reality) -> None:
    template = """
heat_template_version: 2021-04-16
resources:
  slow: {type: Test::Thing, properties: {gate: never}}
"""
    stack = await cv.create_stack("slow", template, timeout_mins=0.01, disable_rollback=True)
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason == "Timed out"
    assert reality.things == {}


async def test_heat_test_resource_failure_reason(cv: Converge) -> None:
    template = """
heat_template_version: 2021-04-16
resources:
  broken: {type: OS::Heat::TestResource, properties: {fail: true}}
"""
    stack = await cv.create_stack("t", template, disable_rollback=True)
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason == (
        "Resource CREATE failed: ValueError: resources.broken: Test Resource failed broken"
    )


@pytest.mark.embedded_only(IN_MEMORY_REALITY)
async def test_replacement_asked_from_create_fails_the_resource(cv: Converge) -> None:
    template = """
heat_template_version: 2021-04-16
resources:
  odd: {type: Test::Thing, properties: {replace_on_create: true}}
"""
    stack = await cv.create_stack("t", template, disable_rollback=True)
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason == (
        "Resource CREATE failed: Error: resources.odd: odd wants replacing already (while creating)"
    )
    assert [r.resource_status for r in await cv.list_resources("t")] == ["CREATE_FAILED"]


async def test_per_action_timeout_fails_the_resource(
    tmp_path: Path, registry: PluginRegistry, reality: Reality
) -> None:
    template = """
heat_template_version: 2021-04-16
resources:
  slow: {type: Test::Thing, properties: {gate: never}}
"""
    settings = EngineSettings(sweep_interval=0.1, action_timeout=0.2)
    async with Converge.embedded(tmp_path / "s.db", settings=settings, registry=registry) as cv:
        stack = await cv.create_stack("slow", template, disable_rollback=True)
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason == "Resource CREATE failed: Error: resources.slow: Timed out"
    assert reality.things == {}


async def test_type_unknown_to_this_engine_fails_instead_of_retrying(
    registry: PluginRegistry, tmp_path: Path
) -> None:
    """A stack made where ``Test::Thing`` was configured, deleted by an engine without it."""
    template = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing, properties: {value: x}}
"""
    state = tmp_path / "state.db"
    async with Converge.embedded(state, settings=FAST, registry=registry) as maker:
        await maker.create_stack("s", template)
    async with Converge.embedded(state, settings=FAST) as other:
        stack = await other.delete_stack("s")
        assert stack.stack_status == "DELETE_FAILED"
        assert "unknown resource type 'Test::Thing'" in stack.stack_status_reason
        assert "this engine cannot act on it" in stack.stack_status_reason
