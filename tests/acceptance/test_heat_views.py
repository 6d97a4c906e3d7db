"""What a stack shows, as Heat shows it (heat/engine/api.py format_stack, parameters'
__str__, outputs with conditions)."""

from __future__ import annotations

import pytest

from converge.api import Converge
from support.world import IN_MEMORY_REALITY

TEMPLATE = """
heat_template_version: 2021-04-16
parameters:
  flag: {type: boolean, default: false}
  count: {type: number, default: 3}
  zones: {type: comma_delimited_list, default: [a, b]}
  extra: {type: json, default: {k: 1}}
  secret: {type: string, default: s3cret, hidden: true}
conditions:
  never: {get_param: flag}
resources:
  a: {type: OS::Heat::Value, properties: {value: {get_param: count}}}
outputs:
  shown: {value: {get_attr: [a, value]}, description: always}
  hidden_by_condition: {value: {get_attr: [a, value]}, condition: never, description: disabled}
"""


async def test_parameters_are_shown_as_heat_writes_them(cv: Converge) -> None:
    stack = await cv.create_stack("v", TEMPLATE)
    assert stack.parameters == {
        "flag": "False",
        "count": "3",
        "zones": "a,b",
        "extra": '{"k": 1}',
        "secret": "******",
        "OS::stack_id": stack.id,
        "OS::project_id": cv.project_id,  # "default" embedded; the test's own distributed
        "OS::stack_name": "v",
    }


async def test_an_output_whose_condition_is_false_is_listed_with_a_null_value(
    cv: Converge,
) -> None:
    await cv.create_stack("v", TEMPLATE)
    outputs = {o["output_key"]: o for o in await cv.outputs("v")}
    assert outputs["shown"]["output_value"] == 3
    assert outputs["hidden_by_condition"]["output_value"] is None
    assert outputs["hidden_by_condition"]["description"] == "disabled"


VICTIM = """
heat_template_version: 2021-04-16
resources:
  oops: {type: OS::Heat::TestResource, properties: {fail: true}}
"""

OWNER = """
heat_template_version: 2021-04-16
resources:
  victim: {type: victim.yaml}
"""


async def test_failure_reasons_name_the_error_and_the_nested_path(cv: Converge) -> None:
    # Heat: "Resource CREATE failed: ValueError: resources.victim.resources.oops: Test
    # Resource failed oops" (the exception's class and the path through nested stacks).
    stack = await cv.create_stack(
        "owner", OWNER, files={"victim.yaml": VICTIM}, disable_rollback=True
    )
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason == (
        "Resource CREATE failed: ValueError: resources.victim.resources.oops: "
        "Test Resource failed oops"
    )
    (victim,) = await cv.list_resources("owner")
    assert victim.resource_status_reason == (
        "ValueError: resources.victim.resources.oops: Test Resource failed oops"
    )


REPLACED = """
heat_template_version: 2021-04-16
parameters:
  fixed: {type: string, default: a}
resources:
  r: {type: Test::Thing, properties: {fixed: {get_param: fixed}}}
  gone: {type: Test::Thing}
"""


@pytest.mark.embedded_only(IN_MEMORY_REALITY)
async def test_events_of_a_replacement_and_of_deletes_say_what_happened(cv: Converge) -> None:
    await cv.create_stack("e", REPLACED)
    without_gone = REPLACED.replace("  gone: {type: Test::Thing}\n", "")
    await cv.update_stack("e", without_gone, parameters={"fixed": "b"})
    events = [
        (e.resource_status, e.resource_status_reason)
        for e in await cv.list_events("e", resource_name="r")
    ]
    # Heat marks the old resource UPDATE_COMPLETE ("requires replacement") before the new
    # one is created, then deletes the old one.
    replaced_at = events.index(
        (
            "UPDATE_COMPLETE",
            "The Resource r requires replacement: changed properties that cannot be updated "
            "in place: fixed",
        )
    )
    assert events[replaced_at + 1][0] == "CREATE_IN_PROGRESS"
    assert ("DELETE_IN_PROGRESS", "replaced by a new resource") in events
    assert ("UPDATE_IN_PROGRESS", "Replacing") not in [(s, r.split(":")[0]) for s, r in events]
    gone = [
        (e.resource_status, e.resource_status_reason)
        for e in await cv.list_events("e", resource_name="gone")
    ]
    assert ("DELETE_IN_PROGRESS", "not in the current template") in gone
    await cv.delete_stack("e")
    last = [
        (e.resource_status, e.resource_status_reason)
        for e in await cv.list_events("e", resource_name="r")
    ]
    # A stack delete is not a template change: Heat says "state changed".
    assert last[-2:] == [
        ("DELETE_IN_PROGRESS", "state changed"),
        ("DELETE_COMPLETE", "state changed"),
    ]


SHOWN = """
heat_template_version: 2021-04-16
resources:
  t: {type: OS::Heat::TestResource, properties: {value: seen}}
  box: {type: box.yaml}
"""

BOX = """
heat_template_version: 2021-04-16
resources:
  inner: {type: OS::Heat::Value, properties: {value: 42}}
outputs:
  answer: {value: {get_attr: [inner, value]}}
"""


async def test_resource_show_resolves_every_attribute_of_the_type(cv: Converge) -> None:
    # Heat's resource show lists every attribute, not only those a template referenced.
    await cv.create_stack("a", SHOWN, files={"box.yaml": BOX})
    shown = await cv.get_resource("a", "t")
    assert shown.attributes["output"] == "seen"
    assert "show" not in shown.attributes
    box = await cv.get_resource("a", "box")
    assert box.attributes["answer"] == 42
    assert box.attributes["OS::stack_id"]


ALIASED = """
heat_template_version: 2021-04-16
resources:
  server: {type: My::Server}
  box: {type: box.yaml}
"""


async def test_resource_type_is_shown_as_the_template_wrote_it(cv: Converge) -> None:
    # Heat shows an alias or a template file name, not what the registry mapped it to.
    env = "resource_registry:\n  My::Server: OS::Heat::None\n"
    await cv.create_stack("t", ALIASED, files={"box.yaml": BOX}, environments=[env])
    types = {r.resource_name: r.resource_type for r in await cv.list_resources("t")}
    assert types == {"server": "My::Server", "box": "box.yaml"}
    assert (await cv.get_resource("t", "server")).resource_type == "My::Server"
