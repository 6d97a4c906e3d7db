"""Provider templates: a resource whose type is a template file is a nested stack."""

from __future__ import annotations

import asyncio

import pytest

from converge.api import Converge
from converge.errors import TemplateError
from support.world import Reality, eventually, paused_at

BOX = """
heat_template_version: 2021-04-16
parameters:
  size: {type: string}
  label: {type: string, default: plain}
resources:
  part:
    type: Test::Thing
    properties:
      value: {list_join: ['-', [{get_param: label}, {get_param: size}]]}
outputs:
  described: {value: {get_attr: [part, value]}}
  part_id: {value: {get_resource: part}}
"""

OUTER = """
heat_template_version: 2021-04-16
parameters:
  size: {type: string, default: small}
resources:
  box:
    type: box.yaml
    properties: {size: {get_param: size}}
  reader:
    type: Test::Thing
    properties:
      value: {get_attr: [box, described]}
      fixed: {get_resource: box}
outputs:
  seen: {value: {get_attr: [reader, value]}}
  nested_id: {value: {get_resource: box}}
  everything: {value: {get_attr: [box]}}
"""

FILES = {"box.yaml": BOX}


async def nested_stacks(cv: Converge) -> list[str]:
    return [s.stack_name for s in await cv.list_stacks(show_nested=True) if s.parent]


async def test_create_passes_properties_in_and_outputs_out(cv: Converge, reality: Reality) -> None:
    stack = await cv.create_stack("outer", OUTER, files=FILES)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    # The nested stack made the real thing, with the property given as its parameter.
    ((part_id, part),) = reality.by_name("part").items()
    assert part["value"] == "plain-small"
    outputs = {o["output_key"]: o["output_value"] for o in await cv.outputs("outer")}
    assert outputs["seen"] == "plain-small"  # an output of the nested stack, via get_attr
    assert outputs["everything"]["described"] == "plain-small"
    assert outputs["everything"]["part_id"] == part_id
    # get_resource of the provider resource is Heat's identifier of the nested stack
    # (arn:openstack:heat::PROJECT:stacks/NAME/ID); that stack names its owner.
    arn = outputs["nested_id"]
    assert arn.startswith("arn:openstack:heat::default:stacks/")
    nested = await cv.get_stack(arn.rsplit("/", 1)[1])
    assert arn == f"arn:openstack:heat::default:stacks/{nested.stack_name}/{nested.id}"
    assert nested.parent == stack.id and nested.stack_status == "CREATE_COMPLETE"
    ((_, reader),) = reality.by_name("reader").items()
    assert reader["fixed"] == arn
    # Listing shows the user's stacks; the nested one only when asked.
    assert [s.stack_name for s in await cv.list_stacks()] == ["outer"]
    assert await nested_stacks(cv) == [nested.stack_name]


async def test_property_change_updates_the_nested_stack_in_place(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("outer", OUTER, files=FILES)
    (before,) = reality.by_name("part")
    nested_before = await nested_stacks(cv)
    stack = await cv.update_stack("outer", OUTER, parameters={"size": "large"}, files=FILES)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    ((after, part),) = reality.by_name("part").items()
    assert after == before and part["value"] == "plain-large"  # same thing, updated
    assert await nested_stacks(cv) == nested_before  # same nested stack
    outputs = {o["output_key"]: o["output_value"] for o in await cv.outputs("outer")}
    assert outputs["seen"] == "plain-large"


async def test_changed_provider_template_is_applied(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("outer", OUTER, files=FILES)
    changed = {"box.yaml": BOX.replace("default: plain", "default: fancy")}
    stack = await cv.update_stack("outer", OUTER, files=changed)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert [p["value"] for p in reality.by_name("part").values()] == ["fancy-small"]


async def test_delete_removes_the_nested_stack_and_what_it_made(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("outer", OUTER, files=FILES)
    stack = await cv.delete_stack("outer")
    assert stack.stack_status == "DELETE_COMPLETE", stack.stack_status_reason
    assert reality.things == {}
    assert await nested_stacks(cv) == []


async def test_registry_mapping_and_nested_resource_entries(cv: Converge, reality: Reality) -> None:
    """``My::Box: box.yaml`` in the environment; ``resources.box.part`` reaches inside."""
    template = OUTER.replace("type: box.yaml", "type: My::Box")
    environment = {
        "resource_registry": {
            "My::Box": "box.yaml",
            "resources": {"box": {"part": {"hooks": "pre-create"}}},
        }
    }
    stack = await cv.create_stack(
        "outer", template, files=FILES, environments=[environment], wait=False
    )
    assert stack.stack_status == "CREATE_IN_PROGRESS"

    async def nested_paused() -> bool:
        names = await nested_stacks(cv)
        return bool(names) and await paused_at(cv, names[0], "part", "pre-create")

    await eventually(nested_paused)
    assert reality.things == {}
    (nested,) = await nested_stacks(cv)
    await cv.clear_hook(nested, "part", "pre-create")
    stack = await cv.wait("outer")
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert [p["value"] for p in reality.by_name("part").values()] == ["plain-small"]


async def test_failure_inside_fails_the_owner_and_rolls_back(
    cv: Converge, reality: Reality
) -> None:
    failing = {
        "box.yaml": BOX.replace(
            "properties:\n      value:", "properties:\n      fail: true\n      value:"
        )
    }
    stack = await cv.create_stack("outer", OUTER, files=failing)
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    # Rolled back to nothing: no resource rows are left on the owner.
    assert await cv.list_resources("outer") == []
    events = await cv.list_events("outer", resource_name="box")
    failed = [e for e in events if e.resource_status == "CREATE_FAILED"]
    assert failed and "Thing part failed" in failed[0].resource_status_reason
    assert reality.things == {} and await nested_stacks(cv) == []


async def test_mistyped_property_in_provider_template_changes_nothing(
    cv: Converge, reality: Reality
) -> None:
    typo = {"box.yaml": BOX.replace("      value: {list_join", "      valeu: {list_join")}
    with pytest.raises(TemplateError) as caught:
        await cv.create_stack("outer", OUTER, files=typo)
    assert str(caught.value) == (
        "box.yaml:10: resources.part.properties.valeu: unknown property 'valeu' "
        "(did you mean 'value'?)"
    )
    assert await cv.list_stacks(show_nested=True) == []
    assert reality.things == {}


async def test_provider_template_using_itself_is_refused(cv: Converge) -> None:
    loop = """
heat_template_version: 2021-04-16
resources:
  again: {type: loop.yaml}
"""
    with pytest.raises(TemplateError, match="nest deeper than 5 levels"):
        await cv.create_stack("outer", loop, files={"loop.yaml": loop})
    assert await cv.list_stacks(show_nested=True) == []


async def test_nested_template_problem_found_late_fails_the_resource(
    cv: Converge, reality: Reality
) -> None:
    """With a property known only from another resource, the nested stack is checked when
    it is made: the resource fails with the nested template's own message."""
    template = OUTER.replace(
        "properties: {size: {get_param: size}}", "properties: {size: {get_attr: [first, value]}}"
    ).replace(
        "resources:\n  box:",
        "resources:\n  first: {type: Test::Thing, properties: {value: big}}\n  box:",
    )
    typo = {"box.yaml": BOX.replace("      value: {list_join", "      valeu: {list_join")}
    stack = await cv.create_stack("outer", template, files=typo, disable_rollback=True)
    assert stack.stack_status == "CREATE_FAILED"
    assert "box.yaml:10: resources.part.properties.valeu: unknown property" in (
        stack.stack_status_reason
    )


async def test_interrupted_create_adopts_its_nested_stack(cv: Converge, reality: Reality) -> None:
    """The nested stack is named after the resource: asking again finds the one made."""
    gated = {
        "box.yaml": BOX.replace(
            "properties:\n      value:", "properties:\n      gate: g\n      value:"
        )
    }
    await cv.create_stack("outer", OUTER, files=gated, wait=False)

    async def nested_made() -> bool:
        return bool(await nested_stacks(cv))

    await eventually(nested_made)
    (nested,) = [s for s in await cv.list_stacks(show_nested=True) if s.parent]
    # What a worker resuming the interrupted create asks for: the same nested stack.
    store, worker = cv.engine.ctx.store, cv.engine.worker
    owner = await store.find_stack("outer", cv.project_id)
    (row,) = [r for r in await store.list_resources(owner.id) if r.name == "box"]
    again = await worker.nested.apply(worker._context(owner, row), {"size": "small"}, None)
    assert again == nested.id
    reality.gates.setdefault("g", asyncio.Event()).set()
    done = await cv.wait("outer")
    assert done.stack_status == "CREATE_COMPLETE", done.stack_status_reason
    assert await nested_stacks(cv) == [nested.stack_name]
    assert len(reality.by_name("part")) == 1


async def test_retained_nested_stack_outlives_its_owner_and_is_listed(
    cv: Converge, reality: Reality
) -> None:
    retained = OUTER.replace(
        "    type: box.yaml\n", "    type: box.yaml\n    deletion_policy: Retain\n"
    )
    await cv.create_stack("outer", retained, files=FILES)
    (nested,) = await nested_stacks(cv)
    stack = await cv.delete_stack("outer")
    assert stack.stack_status == "DELETE_COMPLETE", stack.stack_status_reason
    # Kept, with what it made, and no longer hidden behind an owner that is gone.
    assert [s.stack_name for s in await cv.list_stacks()] == [nested]
    assert len(reality.by_name("part")) == 1


async def test_check_goes_into_nested_stacks(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("outer", OUTER, files=FILES)
    stack = await cv.check_stack("outer")
    assert stack.stack_status == "CHECK_COMPLETE", stack.stack_status_reason
    assert "box: nested (1 in sync)" in stack.stack_status_reason
    # Out of band, inside the nested stack: found by the owner's check, recorded there.
    (part_id,) = reality.by_name("part")
    del reality.things[part_id]
    stack = await cv.check_stack("outer")
    assert stack.stack_status == "CHECK_COMPLETE", stack.stack_status_reason
    assert "box: nested (1 deleted)" in stack.stack_status_reason
    (nested,) = await nested_stacks(cv)
    assert [(d.resource_name, d.drift_status) for d in await cv.drift(nested)] == [
        ("part", "DELETED")
    ]


async def test_converge_update_reaches_into_nested_stacks(cv: Converge, reality: Reality) -> None:
    """Heat's ``converge: true`` is passed on: what drifted inside is corrected too."""
    await cv.create_stack("outer", OUTER, files=FILES)
    (part_id,) = reality.by_name("part")
    del reality.things[part_id]  # out of band, inside the nested stack
    plain = await cv.update_stack("outer", OUTER, files=FILES)
    assert plain.stack_status == "UPDATE_COMPLETE"
    assert reality.by_name("part") == {}  # a plain update compares with what was applied
    stack = await cv.update_stack("outer", OUTER, files=FILES, converge=True)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    ((_, part),) = reality.by_name("part").items()
    assert part["value"] == "plain-small"
