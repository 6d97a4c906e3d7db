"""Drift on every built-in type: found by check, corrected by a converge update."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from converge.api import Converge
from converge.resources.builtin.world import SETTING, TestWorld

TEMPLATE = """
heat_template_version: 2021-04-16
resources:
  none: {type: OS::Heat::None, properties: {anything: 1}}
  test: {type: OS::Heat::TestResource, properties: {value: hello}}
  val: {type: OS::Heat::Value, properties: {value: v1, type: string}}
  secret: {type: OS::Heat::RandomString, properties: {length: 12}}
  dummy:
    type: OS::Heat::Dummy
    properties: {update_in_place_prop: a, action_delay: 0}
  user:
    type: OS::Heat::TestResource
    properties: {value: {get_attr: [secret, value]}}
outputs:
  secret: {value: {get_attr: [secret, value]}}
"""

# (resource, property changed out of band or None to delete it, value, wanted)
DRIFTS: list[tuple[str, str | None, Any, Any]] = [
    ("none", None, None, None),
    ("test", "value", "tampered", "hello"),
    ("val", "value", "v2", "v1"),
    ("secret", "length", 5, 12),
    ("dummy", "update_in_place_prop", "b", "a"),
    ("dummy", "name_len", 3, 8),
]


@pytest.fixture
def world(cv: Converge) -> TestWorld:
    """The test world the handle's plugins (in this process or the workers) act on."""
    return TestWorld(cv.engine.ctx.settings.plugin_settings[SETTING])


async def physical(cv: Converge, stack: str) -> dict[str, tuple[str, str]]:
    return {
        r.resource_name: (r.resource_type, r.physical_resource_id)
        for r in await cv.list_resources(stack)
    }


def entity_type(type_name: str) -> str:
    return "OS::Heat::Dummy" if type_name == "Dummy" else type_name


def change(world: TestWorld, type_name: str, pid: str, prop: str | None, value: Any) -> None:
    if prop is None:
        assert world.remove(entity_type(type_name), pid)
    else:
        world.set_property(entity_type(type_name), pid, prop, value)


@pytest.mark.parametrize(("name", "prop", "value", "wanted"), DRIFTS)
async def test_check_finds_drift_and_converge_corrects_it(
    cv: Converge, world: TestWorld, name: str, prop: str | None, value: Any, wanted: Any
) -> None:
    stack = await cv.create_stack("s", TEMPLATE)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    before = await physical(cv, "s")
    # every built-in type made its thing in the test world
    for type_name, pid in before.values():
        assert world.get(entity_type(type_name), pid) is not None
    checked = await cv.check_stack("s")
    assert checked.stack_status == "CHECK_COMPLETE", checked.stack_status_reason
    assert {d.drift_status for d in await cv.drift("s")} == {"IN_SYNC"}

    type_name, pid = before[name]
    change(world, type_name, pid, prop, value)
    checked = await cv.check_stack("s")
    assert checked.stack_status == "CHECK_COMPLETE"
    drift = {d.resource_name: d for d in await cv.drift("s")}
    expected = "DELETED" if prop is None else "MODIFIED"
    assert drift[name].drift_status == expected
    if prop is not None:
        assert drift[name].drift_detail == {prop: {"wanted": wanted, "found": value}}
    assert {d.drift_status for n, d in drift.items() if n != name} == {"IN_SYNC"}
    events = await cv.list_events("s", resource_name=name)
    assert events[-1].resource_status == "CHECK_COMPLETE"
    assert expected in events[-1].resource_status_reason

    # an ordinary update compares with what was applied: nothing to do, drift stays
    same = await cv.update_stack("s", TEMPLATE)
    assert same.stack_status == "UPDATE_COMPLETE"
    assert await physical(cv, "s") == before
    if prop is None:
        assert world.get(entity_type(type_name), pid) is None

    updated = await cv.update_stack("s", TEMPLATE, converge=True)
    assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
    after = await physical(cv, "s")
    new_type, new_pid = after[name]
    live = world.get(entity_type(new_type), new_pid)
    assert live is not None, "reality matches again"
    if prop is not None:
        assert live["properties"][prop] == wanted
    reasons = [e.resource_status_reason for e in await cv.list_events("s", resource_name=name)]
    assert any(r.startswith("Drift found:") for r in reasons)
    assert {d.drift_status for d in await cv.drift("s")} == {"IN_SYNC"}
    assert (await cv.check_stack("s")).stack_status == "CHECK_COMPLETE"
    assert {d.drift_status for d in await cv.drift("s")} == {"IN_SYNC"}


async def test_deleted_resource_is_created_again_by_converge_update(
    cv: Converge, world: TestWorld
) -> None:
    await cv.create_stack("s", TEMPLATE)
    _type, pid = (await physical(cv, "s"))["test"]
    world.remove("OS::Heat::TestResource", pid)
    updated = await cv.update_stack("s", TEMPLATE, converge=True)
    assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
    _type, new_pid = (await physical(cv, "s"))["test"]
    live = world.get("OS::Heat::TestResource", new_pid)
    assert live is not None and live["properties"]["value"] == "hello"
    states = [e.resource_status for e in await cv.list_events("s", resource_name="test")]
    assert states[-2:] == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]


async def test_replaced_secret_flows_to_dependents(cv: Converge, world: TestWorld) -> None:
    await cv.create_stack("s", TEMPLATE)
    before = await physical(cv, "s")
    old_secret = (await cv.outputs("s"))[0]["output_value"]
    world.set_property("OS::Heat::RandomString", before["secret"][1], "length", 5)
    await cv.update_stack("s", TEMPLATE, converge=True)
    after = await physical(cv, "s")
    assert after["secret"] != before["secret"]
    assert world.get("OS::Heat::RandomString", before["secret"][1]) is None
    new_secret = (await cv.outputs("s"))[0]["output_value"]
    assert new_secret != old_secret and len(new_secret) == 12
    user = world.get("OS::Heat::TestResource", after["user"][1])
    assert user is not None and user["properties"]["value"] == new_secret


async def test_hidden_properties_are_masked_in_drift(tmp_path: Path) -> None:
    from converge.core.drift import MASK, compare

    drift = compare({"password": "a", "x": 1}, {"password": "b", "x": 2}, {"password"})
    assert drift.detail == {
        "password": {"wanted": MASK, "found": MASK},
        "x": {"wanted": 1, "found": 2},
    }


async def test_check_refused_while_an_update_runs(cv: Converge) -> None:
    from converge.errors import Conflict

    slow = TEMPLATE.replace("{value: hello}", "{value: hello, wait_secs: 0.3}")
    await cv.create_stack("s", TEMPLATE)
    await cv.update_stack("s", slow.replace("hello", "bye"), wait=False)
    with pytest.raises(Conflict, match="IN_PROGRESS"):
        await cv.check_stack("s")
    assert (await cv.wait("s")).stack_status == "UPDATE_COMPLETE"
