"""OS::Heat::ResourceGroup and ResourceChain, as Heat behaves (resource_group.py, its
functional tests test_resource_group.py and test_create_update_rolling)."""

from __future__ import annotations

import pytest

from converge.api import Converge
from converge.errors import TemplateError
from support.world import Reality

GROUP = """
heat_template_version: 2021-04-16
parameters:
  count: {type: number, default: 3}
  value: {type: string, default: v}
  removed: {type: comma_delimited_list, default: []}
  mode: {type: string, default: append}
resources:
  g:
    type: OS::Heat::ResourceGroup
    properties:
      count: {get_param: count}
      removal_policies: [{resource_list: {get_param: removed}}]
      removal_policies_mode: {get_param: mode}
      resource_def:
        type: Test::Thing
        properties: {value: {list_join: ['-', [{get_param: value}, '%index%']]}}
  reader:
    type: Test::Thing
    properties:
      value: {list_join: [',', {get_attr: [g, value]}]}
outputs:
  refs: {value: {get_attr: [g, refs]}}
  refs_map: {value: {get_attr: [g, refs_map]}}
  values: {value: {get_attr: [g, value]}}
  by_member: {value: {get_attr: [g, attributes, value]}}
  second: {value: {get_attr: [g, resource.1]}}
  second_value: {value: {get_attr: [g, resource.1.value]}}
  removed: {value: {get_attr: [g, removed_rsrc_list]}}
"""


async def outputs(cv: Converge, name: str) -> dict[str, object]:
    return {o["output_key"]: o["output_value"] for o in await cv.outputs(name)}


def members(reality: Reality) -> dict[str, str]:
    """Member name to value, for the members that exist."""
    return {
        props["__name__"]: props["value"]
        for props in reality.things.values()
        if props["__name__"].isdigit()
    }


async def test_count_members_with_the_index_and_heats_attributes(
    cv: Converge, reality: Reality
) -> None:
    stack = await cv.create_stack("grp", GROUP)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert members(reality) == {"0": "v-0", "1": "v-1", "2": "v-2"}
    out = await outputs(cv, "grp")
    ids = {props["__name__"]: pid for pid, props in reality.things.items()}
    assert out["refs"] == [ids["0"], ids["1"], ids["2"]]
    assert out["refs_map"] == {"0": ids["0"], "1": ids["1"], "2": ids["2"]}
    assert out["values"] == ["v-0", "v-1", "v-2"]
    assert out["by_member"] == {"0": "v-0", "1": "v-1", "2": "v-2"}
    assert out["second"] == ids["1"]
    assert out["second_value"] == "v-1"
    assert out["removed"] == []
    # A dependent sees the members' attributes.
    assert next(iter(reality.by_name("reader").values()))["value"] == "v-0,v-1,v-2"
    # As in Heat, the group is a nested stack.
    nested = [s for s in await cv.list_stacks(show_nested=True) if s.parent]
    assert len(nested) == 1
    assert {r.resource_name for r in await cv.list_resources(nested[0].id)} == {"0", "1", "2"}


async def test_shrinking_removes_the_highest_members_and_growing_adds_after_them(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("grp", GROUP, parameters={"count": 4})
    before = {props["__name__"]: pid for pid, props in reality.things.items()}
    shrunk = await cv.update_stack("grp", GROUP, parameters={"count": 2})
    assert shrunk.stack_status == "UPDATE_COMPLETE", shrunk.stack_status_reason
    assert members(reality) == {"0": "v-0", "1": "v-1"}
    assert sorted(reality.actions("delete")) == sorted([before["2"], before["3"]])
    grown = await cv.update_stack("grp", GROUP, parameters={"count": 3})
    assert grown.stack_status == "UPDATE_COMPLETE", grown.stack_status_reason
    assert members(reality) == {"0": "v-0", "1": "v-1", "2": "v-2"}
    # The members that stayed were never touched.
    assert before["0"] in reality.things and before["1"] in reality.things


async def test_removal_policy_removes_named_members_and_never_reuses_their_names(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("grp", GROUP)
    refs = (await outputs(cv, "grp"))["refs_map"]
    assert isinstance(refs, dict)
    # One by name, one by its reference id (as the refs attribute gives it).
    updated = await cv.update_stack(
        "grp", GROUP, parameters={"count": 3, "removed": f"1,{refs['2']}"}
    )
    assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
    assert members(reality) == {"0": "v-0", "3": "v-3", "4": "v-4"}
    assert (await outputs(cv, "grp"))["removed"] == ["1", "2"]
    # append mode: the policy is remembered when the next update no longer lists them.
    again = await cv.update_stack("grp", GROUP, parameters={"count": 4, "removed": ""})
    assert again.stack_status == "UPDATE_COMPLETE", again.stack_status_reason
    assert set(members(reality)) == {"0", "3", "4", "5"}
    assert (await outputs(cv, "grp"))["removed"] == ["1", "2"]


async def test_update_mode_replaces_the_remembered_removals(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("grp", GROUP, parameters={"removed": "0"})
    assert set(members(reality)) == {"1", "2", "3"}
    updated = await cv.update_stack(
        "grp", GROUP, parameters={"removed": "", "mode": "update", "count": 3}
    )
    assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
    # The list is now empty: the names count from 0 again, the highest goes.
    assert set(members(reality)) == {"0", "1", "2"}
    assert (await outputs(cv, "grp"))["removed"] == []


async def test_patch_update_of_the_groups_properties(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("grp", GROUP, parameters={"value": "a"})
    patched = await cv.update_stack("grp", existing=True, parameters={"count": 1})
    assert patched.stack_status == "UPDATE_COMPLETE", patched.stack_status_reason
    assert members(reality) == {"0": "a-0"}


ROLLING = """
heat_template_version: 2021-04-16
parameters:
  value: {type: string, default: old}
resources:
  g:
    type: OS::Heat::ResourceGroup
    update_policy:
      rolling_update: {max_batch_size: 2, min_in_service: 1}
      batch_create: {max_batch_size: 2}
    properties:
      count: 5
      resource_def:
        type: Test::Thing
        properties: {value: {get_param: value}}
"""


async def nested_operations(cv: Converge, stack: str) -> list[str]:
    """The reasons of the nested stack's own stack-level events, in order."""
    (nested,) = [s for s in await cv.list_stacks(show_nested=True) if s.parent]
    return [
        event.resource_status_reason
        for event in await cv.list_events(nested.id)
        if event.resource_name == nested.stack_name and "started" in event.resource_status_reason
    ]


async def test_batch_create_makes_the_members_in_batches(cv: Converge, reality: Reality) -> None:
    stack = await cv.create_stack("roll", ROLLING)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert set(members(reality)) == {"0", "1", "2", "3", "4"}
    # 2 + 2 + 1: one create of the nested stack, then two updates that add to it.
    assert await nested_operations(cv, "roll") == [
        "Stack CREATE started",
        "Stack UPDATE started",
        "Stack UPDATE started",
    ]
    created = [name for action, name, _ in reality.log if action == "create"]
    assert sorted(created[:2]) == ["0", "1"]
    assert sorted(created[2:4]) == ["2", "3"] and created[4] == "4"


async def test_rolling_update_changes_members_in_batches_highest_first(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("roll", ROLLING)
    reality.log.clear()
    updated = await cv.update_stack("roll", ROLLING, parameters={"value": "new"})
    assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
    assert set(members(reality).values()) == {"new"}
    order = [name for action, name, _ in reality.log if action == "update"]
    # Batches of two with one member kept in service: {3, 4}, then {1, 2}, then {0}.
    assert sorted(order[:2]) == ["3", "4"]
    assert sorted(order[2:4]) == ["1", "2"]
    assert order[4:] == ["0"]


CHAIN = """
heat_template_version: 2021-04-16
resources:
  c:
    type: OS::Heat::ResourceChain
    properties:
      resources: [Test::Thing, Test::Thing, Test::Thing]
      resource_properties: {value: linked}
outputs:
  refs: {value: {get_attr: [c, refs]}}
"""


async def test_resource_chain_creates_in_order_and_deletes_in_reverse(
    cv: Converge, reality: Reality
) -> None:
    stack = await cv.create_stack("chain", CHAIN)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert [name for action, name, _ in reality.log if action == "create"] == ["0", "1", "2"]
    refs = (await outputs(cv, "chain"))["refs"]
    assert isinstance(refs, list) and len(refs) == 3
    deleted = await cv.delete_stack("chain")
    assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
    assert [name for action, name, _ in reality.log if action == "delete"] == ["2", "1", "0"]
    assert reality.things == {}
    assert await cv.list_stacks(show_nested=True) == []


async def test_a_mistyped_member_property_is_refused_before_anything_is_made(
    cv: Converge, reality: Reality
) -> None:
    # Heat validates a group through a nested stack of one member.
    bad = GROUP.replace("properties: {value: {list_join", "properties: {valeu: {list_join")
    with pytest.raises(TemplateError) as caught:
        await cv.create_stack("grp", bad)
    message = str(caught.value)
    assert "resources.g.properties" in message
    assert "unknown property 'valeu' (did you mean 'value'?)" in message
    assert reality.things == {}
    assert await cv.list_stacks(show_nested=True) == []
