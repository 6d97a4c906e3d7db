"""Provider template resources, where Heat decides: what changes the nested stack, and
which values are passed to it as parameters (TemplateResource.child_params)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from converge.api import Converge
from converge.views import StackView
from support.world import Reality, eventually

BOX = """
heat_template_version: 2021-04-16
parameters:
  size: {type: string, default: small}
  colour: {type: string, default: grey}
resources:
  part:
    type: Test::Thing
    properties:
      value: {list_join: ['-', [{get_param: size}, {get_param: colour}]]}
"""

OUTER = """
heat_template_version: 2021-04-16
resources:
  box:
    type: box.yaml
    properties: {size: large}
"""


def part_value(reality: Reality) -> str:
    ((props,),) = [list(reality.by_name("part").values())]
    return str(props["value"])


async def test_a_changed_template_file_updates_the_nested_stack(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("outer", OUTER, files={"box.yaml": BOX})
    assert part_value(reality) == "large-grey"
    changed = BOX.replace("default: grey", "default: blue")
    stack = await cv.update_stack("outer", OUTER, files={"box.yaml": changed})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    # The resource's properties are the same; the nested template is not.
    assert part_value(reality) == "large-blue"
    reality.log.clear()
    again = await cv.update_stack("outer", OUTER, files={"box.yaml": changed})
    assert again.stack_status == "UPDATE_COMPLETE", again.stack_status_reason
    assert reality.log == []


async def test_parameter_defaults_reach_the_parameters_the_template_does_not_set(
    cv: Converge, reality: Reality
) -> None:
    # Only ``size`` is set by the template, so the environment's parameter_defaults
    # decide ``colour`` in the nested stack, as in Heat.
    env = "parameter_defaults:\n  colour: red\n  size: tiny\n"
    stack = await cv.create_stack("outer", OUTER, files={"box.yaml": BOX}, environments=[env])
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert part_value(reality) == "large-red"


GATED = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string}
  gate: {type: string, default: ''}
resources:
  part:
    type: Test::Thing
    properties: {value: {get_param: v}, gate: {get_param: gate}}
"""

GATED_OUTER = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
  gate: {type: string, default: ''}
resources:
  box:
    type: gated.yaml
    properties: {v: {get_param: v}, gate: {get_param: gate}}
"""


async def test_a_newer_update_cancels_the_nested_update_still_running_and_proceeds(
    cv: Converge, reality: Reality
) -> None:
    # Heat's handle_preempt: the new traversal cancels the nested stack's update
    # (without rollback) instead of waiting for the resource the old one holds.
    files = {"gated.yaml": GATED}
    await cv.create_stack("outer", GATED_OUTER, files=files)
    await cv.update_stack(
        "outer", GATED_OUTER, files=files, parameters={"v": "two", "gate": "g1"}, wait=False
    )

    async def nested() -> StackView:
        (found,) = [s for s in await cv.list_stacks(show_nested=True) if s.parent]
        return found

    await eventually(lambda: _is(nested, "UPDATE_IN_PROGRESS"))
    await cv.update_stack("outer", GATED_OUTER, files=files, parameters={"v": "three"}, wait=False)
    await eventually(lambda: _cancelled(cv, nested))
    # The part still waiting at its gate finishes normally; then the newer update wins.
    reality.gates.setdefault("g1", asyncio.Event()).set()
    stack = await cv.wait("outer")
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert part_value(reality) == "three"
    assert (await nested()).stack_status == "UPDATE_COMPLETE"


async def _is(nested: Callable[[], Awaitable[StackView]], status: str) -> bool:
    return (await nested()).stack_status == status


async def _cancelled(cv: Converge, nested: Callable[[], Awaitable[StackView]]) -> bool:
    # An event: the newer update of the nested stack may already have started after it.
    found = await nested()
    return any(
        event.resource_status == "UPDATE_FAILED"
        and event.resource_status_reason == "Stack UPDATE cancelled"
        for event in await cv.list_events(found.id)
    )
