"""An update (or any operation but a delete) that was let in before a delete began must not
start after it: the delete is what the user asked for last. Found by a stress run: an
update checked the stack, a delete began and completed, and the update then converged the
deleted stack, making every resource again for a stack nobody could see any more."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from converge.api import Converge
from converge.errors import Conflict, NotFound
from support.world import Reality, eventually, paused_at

TEMPLATE = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
resources:
  a: {type: Test::Thing, properties: {value: {get_param: v}}}
  b: {type: Test::Thing, properties: {value: {get_attr: [a, value]}}}
"""

PRE_DELETE = "resource_registry:\n  resources:\n    a:\n      hooks: pre-delete\n"


class HeldUpdate:
    """Holds an update between its checks of the stack and its traversal's start."""

    def __init__(self, cv: Converge, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reached, self.go = asyncio.Event(), asyncio.Event()
        operations = cv.engine.operations
        converge = operations.converge

        async def held(stack_id: str, template_id: int, definition: Any, action: Any, **kw: Any):  # type: ignore[no-untyped-def]
            if str(action) == "UPDATE":
                self.reached.set()
                await self.go.wait()
            return await converge(stack_id, template_id, definition, action, **kw)

        monkeypatch.setattr(operations, "converge", held)


async def test_an_update_let_in_before_a_delete_does_not_make_the_deleted_stack_again(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cv.create_stack("s", TEMPLATE)
    held = HeldUpdate(cv, monkeypatch)
    update = asyncio.create_task(cv.update_stack("s", TEMPLATE, parameters={"v": "two"}))
    await asyncio.wait_for(held.reached.wait(), 10)
    deleted = await cv.delete_stack("s")
    assert deleted.stack_status == "DELETE_COMPLETE"
    held.go.set()
    with pytest.raises(Conflict, match="stack s was deleted: its UPDATE cannot start"):
        await update
    assert reality.things == {}
    with pytest.raises(NotFound):
        await cv.get_stack("s")


async def test_an_update_let_in_before_a_delete_does_not_supersede_it(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cv.create_stack("s", TEMPLATE, environments=[PRE_DELETE])
    held = HeldUpdate(cv, monkeypatch)
    update = asyncio.create_task(
        cv.update_stack(
            "s",
            TEMPLATE,
            parameters={"v": "two"},
            timeout_mins=7,
            disable_rollback=True,
            drift_policy="heal",
        )
    )
    await asyncio.wait_for(held.reached.wait(), 10)
    deleting = await cv.delete_stack("s", wait=False)
    assert deleting.stack_status == "DELETE_IN_PROGRESS"
    await eventually(lambda: paused_at(cv, "s", "a", "pre-delete"))
    held.go.set()
    with pytest.raises(Conflict, match="stack s is DELETE_IN_PROGRESS: its UPDATE cannot start"):
        await update
    # The refused update changed nothing, its settings included.
    stack = await cv.get_stack("s")
    assert (stack.timeout_mins, stack.disable_rollback, stack.drift_policy) == (
        None,
        False,
        "notify",
    )
    await cv.clear_hook("s", "a", "pre-delete")
    await eventually(lambda: _gone(cv, "s"))
    assert reality.things == {}


async def _gone(cv: Converge, name: str) -> bool:
    try:
        await cv.get_stack(name)
    except NotFound:
        return True
    return False


async def test_an_updates_settings_start_with_it(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("s", TEMPLATE)
    updated = await cv.update_stack(
        "s", TEMPLATE, parameters={"v": "two"}, timeout_mins=7, disable_rollback=True
    )
    assert updated.stack_status == "UPDATE_COMPLETE"
    assert (updated.timeout_mins, updated.disable_rollback, updated.drift_policy) == (
        7,
        True,
        "notify",
    )
    patched = await cv.update_stack("s", existing=True, drift_policy="heal")
    assert (patched.timeout_mins, patched.disable_rollback, patched.drift_policy) == (
        7,
        True,
        "heal",
    )
