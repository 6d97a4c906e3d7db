"""Heat behaviours kept by converge, each named after the Heat code it follows."""

from __future__ import annotations

from typing import Any

import pytest

from converge.api import Converge
from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext
from converge.resources.registry import PluginRegistry
from support.world import Reality

NONE = """
heat_template_version: 2021-04-16
parameters:
  p: {type: string, default: one}
resources:
  placeholder: {type: OS::Heat::None, properties: {anything: {get_param: p}}}
"""


async def test_os_heat_none_is_never_changed_by_an_update(cv: Converge) -> None:
    """Heat's NoneResource._needs_update is always False: a property change keeps it."""
    await cv.create_stack("s", NONE)
    (before,) = await cv.list_resources("s")
    stack = await cv.update_stack("s", NONE, parameters={"p": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (after,) = await cv.list_resources("s")
    assert after.physical_resource_id == before.physical_resource_id
    assert after.resource_status == "CREATE_COMPLETE"  # not updated, not replaced
    statuses = [e.resource_status for e in await cv.list_events("s", resource_name="placeholder")]
    assert statuses == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]


PAIR = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
  f: {type: string, default: x}
  fail: {type: boolean, default: false}
resources:
  a:
    type: Test::Thing
    properties: {value: {get_param: v}, fixed: {get_param: f}, fail: {get_param: fail}}
  b: {type: Test::Thing, properties: {value: {get_attr: [a, value]}}}
"""


async def test_back_to_the_healthy_original_after_a_failed_replacement(
    cv: Converge, reality: Reality
) -> None:
    """Heat's Stack._get_best_existing_rsrc_db penalises FAILED rows: after a replacement
    failed, going back to the last good template (a manual rollback) updates the healthy
    original in place instead of replacing the failed replacement with a fresh resource."""
    await cv.create_stack("s", PAIR, disable_rollback=True)
    (original,) = reality.by_name("a")
    failed = await cv.update_stack("s", PAIR, parameters={"f": "y", "fail": True})
    assert failed.stack_status == "UPDATE_FAILED", failed.stack_status_reason
    assert set(reality.by_name("a")) == {original}  # the replacement's create failed
    stack = await cv.update_stack("s", PAIR, parameters={"v": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert set(reality.by_name("a")) == {original}
    assert reality.things[original]["value"] == "two"  # updated in place
    assert reality.actions("create", "a") == [original]
    rows = await cv.list_resources("s")
    assert sorted((r.resource_name, r.physical_resource_id) for r in rows)[0] == ("a", original)
    assert len(rows) == 2


async def test_check_marks_each_resource_and_fails_the_stack_when_one_fails(
    cv: Converge, registry: PluginRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Heat's Resource.check / Stack.check: every resource ends CHECK_COMPLETE or
    CHECK_FAILED, and the stack CHECK_FAILED with "Resource CHECK failed: …"."""
    await cv.create_stack("s", PAIR)
    checked = await cv.check_stack("s")
    assert checked.stack_status == "CHECK_COMPLETE", checked.stack_status_reason
    states = {r.resource_name: r.resource_status for r in await cv.list_resources("s")}
    assert states == {"a": "CHECK_COMPLETE", "b": "CHECK_COMPLETE"}

    plugin = registry.plugin("Test::Thing")
    see = plugin.observe

    async def blind_to_b(ctx: ResourceContext, current: AppliedState) -> Any:
        if ctx.resource_name == "b":
            raise PermanentFailure("cannot see b")
        return await see(ctx, current)

    monkeypatch.setattr(plugin, "observe", blind_to_b)
    checked = await cv.check_stack("s")
    assert checked.stack_status == "CHECK_FAILED"
    assert checked.stack_status_reason.startswith("Resource CHECK failed: ")
    assert "cannot see b" in checked.stack_status_reason
    states = {r.resource_name: r.resource_status for r in await cv.list_resources("s")}
    assert states == {"a": "CHECK_COMPLETE", "b": "CHECK_FAILED"}


REPLACEABLE = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
  replace: {type: boolean, default: true}
resources:
  t:
    type: OS::Heat::TestResource
    properties: {value: {get_param: v}, update_replace: {get_param: replace}}
"""


async def test_plan_predicts_the_replacement_the_plugin_decides(cv: Converge) -> None:
    """Heat's preview_update asks the resource (update_template_diff_properties calls
    needs_replace_with_prop_diff; TestResource replaces a changed value when update_replace
    is true), so the preview says replace where the update will replace; plan agrees with
    apply the same way."""
    await cv.create_stack("s", REPLACEABLE)
    (before,) = await cv.list_resources("s")
    (planned,) = await cv.plan("s", REPLACEABLE, parameters={"v": "two"})
    assert (planned.action, planned.reason) == ("REPLACE", "t: value changed with update_replace")
    assert planned.changed_properties == ["value"]
    # Without update_replace the same change is in place, as update does it.
    (in_place,) = await cv.plan("s", REPLACEABLE, parameters={"v": "two", "replace": False})
    assert in_place.action == "UPDATE"
    stack = await cv.update_stack("s", REPLACEABLE, parameters={"v": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (after,) = await cv.list_resources("s")
    assert after.physical_resource_id != before.physical_resource_id  # replaced, as planned
