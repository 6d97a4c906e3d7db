"""Heat's checks on a request and on an update (plugin validation, restricted actions),
through the public API."""

from __future__ import annotations

import pytest

from converge.api import Converge
from converge.errors import TemplateError
from support.world import Reality

RANDOM = """
heat_template_version: 2021-04-16
resources:
  v: {type: OS::Heat::Value, properties: {value: 3}}
  fixed:
    type: OS::Heat::RandomString
    properties:
      length: 4
      character_classes: [{class: digits, min: 3}, {class: letters, min: 3}]
  later:
    type: OS::Heat::RandomString
    properties:
      length: {get_attr: [v, value]}
"""


async def test_random_string_shorter_than_its_minimums_is_refused(cv: Converge) -> None:
    # Heat: "Length property cannot be smaller than combined character class and character
    # sequence minimums", at validation, before any resource is made. A length known only
    # once another resource exists (``later``) is left to create, as in Heat.
    with pytest.raises(TemplateError) as caught:
        await cv.create_stack("s", RANDOM)
    message = str(caught.value)
    assert "resources.fixed.properties.length" in message
    assert "minimums add up to 6" in message
    assert "later" not in message
    assert await cv.list_stacks() == []


THINGS = """
heat_template_version: 2021-04-16
parameters:
  value: {type: string, default: one}
  fixed: {type: string, default: a}
resources:
  guarded:
    type: Test::Thing
    properties: {value: {get_param: value}, fixed: {get_param: fixed}}
"""


def restricted(*actions: str) -> str:
    return (
        "resource_registry:\n  resources:\n    guarded:\n"
        f"      restricted_actions: [{', '.join(actions)}]\n"
    )


@pytest.mark.parametrize(
    ("restricted_action", "change"),
    [("update", {"value": "two"}), ("replace", {"fixed": "b"})],
)
async def test_restricted_actions_fail_the_update_and_leave_the_resource(
    cv: Converge, reality: Reality, restricted_action: str, change: dict[str, str]
) -> None:
    # Heat's functional test_restricted_actions: the update fails with
    # ResourceActionRestricted and the resource keeps its physical id and properties.
    env = restricted(restricted_action)
    await cv.create_stack("s", THINGS, environments=[env], disable_rollback=True)
    ((physical, before),) = reality.by_name("guarded").items()
    stack = await cv.update_stack("s", THINGS, environments=[env], parameters=change)
    assert stack.stack_status == "UPDATE_FAILED"
    assert f"{restricted_action} is restricted for resource" in stack.stack_status_reason
    ((row,),) = [[r for r in await cv.list_resources("s") if r.resource_name == "guarded"]]
    assert row.resource_status == "UPDATE_FAILED"
    assert row.resource_status_reason == (
        f"ResourceActionRestricted: resources.guarded: {restricted_action} is restricted "
        "for resource."
    )
    assert reality.by_name("guarded") == {physical: before}


async def test_a_restricted_update_does_not_forbid_a_replacement(
    cv: Converge, reality: Reality
) -> None:
    env = restricted("update")
    await cv.create_stack("s", THINGS, environments=[env])
    stack = await cv.update_stack("s", THINGS, environments=[env], parameters={"fixed": "b"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert [props["fixed"] for props in reality.by_name("guarded").values()] == ["b"]
