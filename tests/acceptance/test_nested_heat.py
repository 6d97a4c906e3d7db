"""Provider template resources, where Heat decides: what changes the nested stack, and
which values are passed to it as parameters (TemplateResource.child_params)."""

from __future__ import annotations

from converge.api import Converge
from support.world import Reality

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
