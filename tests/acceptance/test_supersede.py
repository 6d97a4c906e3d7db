"""Updates that supersede a running one: row choice, dropped replacements, what is built on.

Each scenario stops the older traversal at an exact point with a hook, starts the newer
one, and asserts on reality: which physical things exist, with which values.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from converge.api import Converge
from support.templates import PAIR
from support.world import Reality, eventually, paused_at


def hooks(resource: str, hook: str) -> str:
    return f"resource_registry:\n  resources:\n    {resource}:\n      hooks: {hook}\n"


async def test_update_during_cleanup_keeps_the_live_replacement(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("s", PAIR)
    (original,) = reality.by_name("a")
    # Replace a, then stop after the replacement exists and before the original goes.
    await cv.update_stack(
        "s", PAIR, parameters={"f": "y"}, environments=[hooks("a", "pre-delete")], wait=False
    )
    await eventually(lambda: paused_at(cv, "s", "a", "pre-delete"))
    (replacement,) = set(reality.by_name("a")) - {original}
    # The newer update changes a in place: it must act on the replacement b points at.
    stack = await cv.update_stack("s", PAIR, parameters={"f": "y", "v": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert set(reality.by_name("a")) == {replacement}
    assert reality.things[replacement]["value"] == "two"
    assert reality.things[replacement]["fixed"] == "y"
    (b_id,) = reality.by_name("b")
    assert reality.things[b_id]["value"] == "two:two"
    rows = await cv.list_resources("s")
    assert sorted((r.resource_name, r.physical_resource_id) for r in rows) == [
        ("a", replacement),
        ("b", b_id),
    ]


async def test_replacement_decided_but_never_created_is_dropped(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cv.create_stack("s", PAIR)
    (original,) = reality.by_name("a")
    worker = cv.engine.worker
    act = worker._act
    stopped: set[str] = set()

    async def dies_after_deciding(
        stack: Any, graph: Any, node: Any, target: Any, *rest: Any, **kw: Any
    ) -> None:
        if target.replaces is not None and stopped <= {stack.current_traversal}:
            # The engine stops here: the replacement's row exists, nothing real. For that
            # update's checks only, the sweeper's re-sends included (one that got through
            # before the newer update began made the replacement: a flaky test).
            stopped.add(stack.current_traversal)
            return
        await act(stack, graph, node, target, *rest, **kw)

    monkeypatch.setattr(worker, "_act", dies_after_deciding)
    await cv.update_stack("s", PAIR, parameters={"f": "y"}, wait=False)
    await eventually(lambda: _rows_named(cv, "s", "a", 2))
    # The newer update wants a kept (f back to x): the replacement nobody made is dropped.
    stack = await cv.update_stack("s", PAIR, parameters={"v": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert set(reality.by_name("a")) == {original}
    assert reality.things[original]["value"] == "two"
    assert reality.actions("create", "a") == [original]
    assert sorted(r.resource_name for r in await cv.list_resources("s")) == ["a", "b"]


FAILING_B = PAIR.replace(
    "{get_param: v}]]}}}",
    "{get_param: v}]]}, fail: {get_param: fail}}}",
).replace(
    "  f: {type: string, default: x}",
    "  f: {type: string, default: x}\n  fail: {type: boolean, default: false}",
)


async def test_rollback_of_an_update_started_during_cleanup_returns_to_its_template(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("s", FAILING_B)
    await cv.update_stack(
        "s", FAILING_B, parameters={"f": "y"}, environments=[hooks("a", "pre-delete")], wait=False
    )
    await eventually(lambda: paused_at(cv, "s", "a", "pre-delete"))
    (original,) = [pid for pid, p in reality.by_name("a").items() if p["fixed"] == "x"]
    (replacement,) = set(reality.by_name("a")) - {original}
    # Reality is what the second template says, only its cleanup is left: an update that
    # fails now rolls back to the second template, not to the first.
    await cv.update_stack("s", FAILING_B, parameters={"f": "y", "fail": True}, wait=False)
    # The rollback target's environment pauses the original's delete again.
    await eventually(lambda: _paused_times(cv, "s", "a", "pre-delete", 2))
    assert (await cv.get_stack("s")).stack_status == "ROLLBACK_IN_PROGRESS"
    await cv.clear_hook("s", "a", "pre-delete")
    stack = await cv.wait("s")
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert set(reality.by_name("a")) == {replacement}
    assert reality.things[replacement]["fixed"] == "y"
    assert reality.actions("create", "a") == [original, replacement]


async def test_rollback_during_cleanup_goes_back_to_the_healthy_original(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("s", PAIR)
    (original,) = reality.by_name("a")
    (b_id,) = reality.by_name("b")
    await cv.update_stack(
        "s", PAIR, parameters={"f": "y"}, environments=[hooks("a", "pre-delete")], wait=False
    )
    await eventually(lambda: paused_at(cv, "s", "a", "pre-delete"))
    stack = await cv.cancel_update("s", rollback=True)
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert set(reality.by_name("a")) == {original}
    assert reality.things[original]["fixed"] == "x"
    assert set(reality.by_name("b")) == {b_id}
    rows = {r.resource_name: r.physical_resource_id for r in await cv.list_resources("s")}
    assert rows == {"a": original, "b": b_id}


async def _rows_named(cv: Converge, stack: str, name: str, count: int) -> bool:
    return sum(r.resource_name == name for r in await cv.list_resources(stack)) == count


async def _paused_times(cv: Converge, stack: str, resource: str, hook: str, times: int) -> bool:
    events = await cv.list_events(stack, resource_name=resource)
    return sum(f"paused until Hook {hook}" in e.resource_status_reason for e in events) == times


WITH_SLOW_DELETE = """
heat_template_version: 2021-04-16
resources:
  keep: {type: OS::Heat::TestResource, properties: {value: k}}
  gone:
    type: OS::Heat::TestResource
    properties: {value: g, action_wait_secs: {delete: 1}}
"""
WITHOUT = """
heat_template_version: 2021-04-16
resources:
  keep: {type: OS::Heat::TestResource, properties: {value: k}}
"""


async def test_resource_removed_then_added_back_while_its_delete_runs(cv: Converge) -> None:
    await cv.create_stack("s", WITH_SLOW_DELETE)
    (before,) = [r for r in await cv.list_resources("s") if r.resource_name == "gone"]
    await cv.update_stack("s", WITHOUT, wait=False)
    await eventually(lambda: _state_of(cv, "s", "gone", "DELETE_IN_PROGRESS"))
    # The newer update wants it back: the superseded delete must not take the row with it.
    stack = await cv.update_stack("s", WITH_SLOW_DELETE)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (after,) = [r for r in await cv.list_resources("s") if r.resource_name == "gone"]
    assert after.resource_status == "CREATE_COMPLETE"
    assert after.physical_resource_id  # made again: the old one was deleted
    assert after.attributes.get("output", "g") == "g"
    assert before.physical_resource_id is not None


async def test_resource_removed_twice_while_its_delete_runs_leaves_no_row(cv: Converge) -> None:
    await cv.create_stack("s", WITH_SLOW_DELETE)
    await cv.update_stack("s", WITHOUT, wait=False)
    await eventually(lambda: _state_of(cv, "s", "gone", "DELETE_IN_PROGRESS"))
    stack = await cv.update_stack("s", WITHOUT)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert [r.resource_name for r in await cv.list_resources("s")] == ["keep"]


async def _state_of(cv: Converge, stack: str, name: str, state: str) -> bool:
    return any(
        r.resource_name == name and r.resource_status == state
        for r in await cv.list_resources(stack)
    )


async def test_an_update_supersedes_a_running_check(cv: Converge, reality: Reality) -> None:
    """CHECK is a traversal like the others: an update started while its observations hang
    takes the stack over, and the check's late results change neither the stack nor the
    rows the update converged."""
    await cv.create_stack("s", PAIR)
    reality.observing = asyncio.Event()  # every observation waits until it is set
    checking = await cv.check_stack("s", wait=False)
    assert checking.stack_status == "CHECK_IN_PROGRESS"
    stack = await cv.update_stack("s", PAIR, parameters={"v": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    reality.observing.set()  # the superseded check's observations end now
    await cv.engine.idle()
    assert (await cv.get_stack("s")).stack_status == "UPDATE_COMPLETE"
    rows = await cv.list_resources("s")
    assert {r.resource_name: r.resource_status for r in rows} == {
        "a": "UPDATE_COMPLETE",
        "b": "UPDATE_COMPLETE",
    }
    (a_id,) = reality.by_name("a")
    assert reality.things[a_id]["value"] == "two"
    reasons = [e.resource_status_reason for e in await cv.list_events("s", resource_name="s")]
    assert "Stack CHECK started" in reasons
    assert not [r for r in reasons if r.startswith(("Stack CHECK completed", "Resource CHECK"))]
    # The next check runs to its end.
    checked = await cv.check_stack("s")
    assert checked.stack_status == "CHECK_COMPLETE", checked.stack_status_reason
    assert checked.stack_status_reason == "Stack CHECK completed successfully (2 in sync)"
