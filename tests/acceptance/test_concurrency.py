"""Operations that supersede running traversals, stopped at exact points with hooks."""

from __future__ import annotations

import asyncio

from converge.api import Converge
from support.templates import PAIR
from support.world import Reality, eventually, paused_at


def hooks(resource: str, hook: str) -> str:
    return f"resource_registry:\n  resources:\n    {resource}:\n      hooks: {hook}\n"


async def test_hook_pauses_and_clearing_resumes(cv: Converge, reality: Reality) -> None:
    stack = await cv.create_stack("h", PAIR, environments=[hooks("b", "pre-create")], wait=False)
    await eventually(lambda: paused_at(cv, "h", "b", "pre-create"))
    assert (await cv.get_stack("h")).stack_status == "CREATE_IN_PROGRESS"
    assert reality.by_name("b") == {}
    await cv.clear_hook("h", "b", "pre-create")
    stack = await cv.wait("h")
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert len(reality.by_name("b")) == 1
    reasons = [e.resource_status_reason for e in await cv.list_events("h", resource_name="b")]
    assert "Hook pre-create is cleared" in reasons


async def test_update_mid_create_builds_untouched_resources_once(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("m", PAIR, environments=[hooks("b", "pre-create")], wait=False)
    await eventually(lambda: paused_at(cv, "m", "b", "pre-create"))
    (a_id,) = reality.by_name("a")
    stack = await cv.update_stack("m", PAIR, parameters={"v": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    # a: made once by the create, updated in place; b: made once, with the new values
    assert reality.by_name("a") == {
        a_id: {
            "value": "two",
            "fixed": "x",
            "fail": False,
            "replace_on_update": False,
            "gate": "",
            "replace_on_create": False,
            "__name__": "a",
        }
    }
    assert len(reality.actions("create", "b")) == 1
    (b_id,) = reality.by_name("b")
    assert reality.things[b_id]["value"] == "two:two"
    assert len(await cv.list_resources("m")) == 2


async def test_work_under_way_finishes_and_is_rechecked(cv: Converge, reality: Reality) -> None:
    gated = PAIR.replace("fixed: {get_param: f}}", "fixed: {get_param: f}, gate: {get_param: f}}")
    await cv.create_stack("g", gated, wait=False)
    await eventually(lambda: _row_in_progress(cv, "g", "a"))
    # a is being created (blocked in the plugin) when the update arrives
    await cv.update_stack("g", gated, parameters={"v": "two"}, wait=False)
    reality.gates.setdefault("x", asyncio.Event()).set()
    stack = await cv.wait("g")
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (a_id,) = reality.by_name("a")
    assert reality.things[a_id]["value"] == "two"
    assert reality.actions("create", "a") == [a_id]


async def test_orphaned_replacement_is_deleted_by_the_next_update(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("o", PAIR)
    (original,) = reality.by_name("a")
    # the update replaces a; stop it before the old a is deleted
    await cv.update_stack(
        "o", PAIR, parameters={"f": "y"}, environments=[hooks("a", "pre-delete")], wait=False
    )
    await eventually(lambda: paused_at(cv, "o", "a", "pre-delete"))
    assert len(reality.by_name("a")) == 2
    stack = await cv.update_stack("o", PAIR, parameters={"f": "z", "v": "three"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (survivor,) = reality.by_name("a")
    assert survivor != original
    assert reality.things[survivor]["fixed"] == "z"
    assert len(await cv.list_resources("o")) == 2


async def test_delete_supersedes_a_running_create(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("d", PAIR, environments=[hooks("b", "pre-create")], wait=False)
    await eventually(lambda: paused_at(cv, "d", "b", "pre-create"))
    stack = await cv.delete_stack("d")
    assert stack.stack_status == "DELETE_COMPLETE", stack.stack_status_reason
    assert reality.things == {}


async def test_cancel_update_with_and_without_rollback(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("c", PAIR)
    before = dict(reality.things)
    await cv.update_stack(
        "c", PAIR, parameters={"v": "two"}, environments=[hooks("b", "pre-update")], wait=False
    )
    await eventually(lambda: paused_at(cv, "c", "b", "pre-update"))
    stack = await cv.cancel_update("c", rollback=True)
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert {pid: p["value"] for pid, p in reality.things.items()} == {
        pid: p["value"] for pid, p in before.items()
    }

    await cv.update_stack(
        "c", PAIR, parameters={"v": "three"}, environments=[hooks("b", "pre-update")], wait=False
    )
    await eventually(lambda: paused_at(cv, "c", "b", "pre-update"))
    stack = await cv.cancel_update("c", rollback=False)
    assert stack.stack_status == "UPDATE_FAILED"
    assert stack.stack_status_reason == "Stack UPDATE cancelled"


async def _row_in_progress(cv: Converge, stack: str, name: str) -> bool:
    return any(
        r.resource_name == name and r.resource_status == "CREATE_IN_PROGRESS"
        for r in await cv.list_resources(stack)
    )
