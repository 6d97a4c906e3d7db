"""Cancelling a running operation, as Heat's stack_cancel_update and stop_traversal do."""

from __future__ import annotations

from converge.api import Converge
from support.world import Reality, eventually, paused_at

PAIR = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing, properties: {value: one}}
  b: {type: Test::Thing, depends_on: a, properties: {value: two}}
"""

HOOK_B = "resource_registry:\n  resources:\n    b:\n      hooks: pre-create\n"


async def test_cancel_without_rollback_during_a_create_fails_it_and_keeps_what_was_made(
    cv: Converge, reality: Reality
) -> None:
    # Heat: cancel_without_rollback is accepted for CREATE_IN_PROGRESS; the stack ends
    # CREATE_FAILED "Stack CREATE cancelled" and nothing more is made.
    await cv.create_stack("c", PAIR, environments=[HOOK_B], wait=False)
    await eventually(lambda: paused_at(cv, "c", "b", "pre-create"))
    stack = await cv.cancel_update("c", rollback=False)
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason == "Stack CREATE cancelled"
    assert set(p["__name__"] for p in reality.things.values()) == {"a"}
    deleted = await cv.delete_stack("c")
    assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
    assert reality.things == {}


async def test_cancel_with_rollback_during_a_create_rolls_back_to_nothing(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("c", PAIR, environments=[HOOK_B], wait=False)
    await eventually(lambda: paused_at(cv, "c", "b", "pre-create"))
    stack = await cv.cancel_update("c", rollback=True)
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert reality.things == {}


BOX = """
heat_template_version: 2021-04-16
resources:
  part: {type: Test::Thing, properties: {value: inside}}
"""

OUTER = """
heat_template_version: 2021-04-16
resources:
  box: {type: box.yaml}
"""

HOOK_NESTED = "resource_registry:\n  resources:\n    box:\n      part:\n        hooks: pre-create\n"


async def test_cancel_stops_the_nested_stacks_below(cv: Converge, reality: Reality) -> None:
    # Heat's stop_traversal stops every in-progress descendant too.
    await cv.create_stack(
        "outer", OUTER, files={"box.yaml": BOX}, environments=[HOOK_NESTED], wait=False
    )

    async def nested_paused() -> bool:
        nested = [s for s in await cv.list_stacks(show_nested=True) if s.parent]
        return bool(nested) and await paused_at(cv, nested[0].id, "part", "pre-create")

    await eventually(nested_paused)
    stack = await cv.cancel_update("outer", rollback=False)
    assert stack.stack_status == "CREATE_FAILED"
    (nested,) = [s for s in await cv.list_stacks(show_nested=True) if s.parent]
    assert nested.stack_status == "CREATE_FAILED"
    assert nested.stack_status_reason == "Stack CREATE cancelled"
    assert reality.things == {}
    deleted = await cv.delete_stack("outer")
    assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
    assert await cv.list_stacks(show_nested=True) == []
