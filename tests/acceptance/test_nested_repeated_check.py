"""A repeated check of a provider-template resource in the same traversal leaves its nested
stack alone: the operation that traversal started (and finished) is not started again.

Found in the 50,000-resource benchmark: re-sent checks of the owner's resources found their
nested stacks COMPLETE and started an UPDATE of each (16,667 more checks apiece).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from converge.api import Converge
from converge.engine.runtime import Engine
from converge.messages import CheckResource
from converge.resources.registry import PluginRegistry
from support.world import FAST, Reality, eventually, paused_at

BOX = """
heat_template_version: 2021-04-16
parameters:
  size: {type: string}
resources:
  part:
    type: Test::Thing
    properties: {value: {get_param: size}}
outputs:
  described: {value: {get_attr: [part, value]}}
"""

OUTER = """
heat_template_version: 2021-04-16
resources:
  box:
    type: box.yaml
    properties: {size: small}
  reader:
    type: Test::Thing
    properties: {value: {get_attr: [box, described]}}
"""

FILES = {"box.yaml": BOX}


async def _nested(cv: Converge) -> Any:
    (nested,) = [s for s in await cv.list_stacks(show_nested=True) if s.parent]
    return nested


async def _stack_events(cv: Converge, stack_id: str) -> list[str]:
    return [
        e.resource_status_reason
        for e in await cv.list_events(stack_id)
        if e.resource_status_reason.startswith("Stack ")
    ]


async def _box_check(cv: Converge, name: str) -> CheckResource:
    """The message that checks ``box`` in the stack's current traversal."""
    store = cv.engine.ctx.store
    stack = await store.find_stack(name, cv.project_id)
    (box,) = [row for row in await store.list_resources(stack.id) if row.name == "box"]
    return CheckResource(stack.id, stack.current_traversal, box.id, True)


async def test_a_check_taken_over_after_its_nested_stack_completed_does_not_update_it(
    cv: Converge, reality: Reality, registry: PluginRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first check of ``box`` made the nested stack, which completed; before it stored
    the result, a second worker (for which the first one's claim looked dead: a late
    heartbeat) got the same message. It takes the row over and finds the nested stack done
    for this traversal: it reports, and nothing in the nested stack is converged again."""
    nested_done, release = asyncio.Event(), asyncio.Event()
    real_wait = cv.engine.worker.nested.wait

    async def first_check_stalls(stack_id: str) -> Any:
        state = await real_wait(stack_id)
        nested_done.set()
        await release.wait()  # as the starved first worker did, for minutes
        return state

    monkeypatch.setattr(cv.engine.worker.nested, "wait", first_check_stalls)
    await cv.create_stack("outer", OUTER, files=FILES, wait=False)
    await asyncio.wait_for(nested_done.wait(), 10)
    message = await _box_check(cv, "outer")

    # The second worker: another engine over the same state, to which the first one is
    # not alive (it never heard its heartbeat).
    second = Engine(cv.engine.ctx.store, cv.engine.ctx.bus, registry=registry, settings=FAST)
    assert cv.engine.engine_id not in second.ctx.live_engines
    await asyncio.wait_for(second.worker.check(message), 10)
    release.set()
    stack = await cv.wait("outer")
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason

    nested = await _nested(cv)
    assert nested.stack_status == "CREATE_COMPLETE"
    assert await _stack_events(cv, nested.id) == [
        "Stack CREATE started",
        "Stack CREATE completed successfully",
    ]
    assert [(action, name) for action, name, _ in reality.log] == [
        ("create", "part"),
        ("create", "reader"),
    ]


async def test_a_converge_check_delivered_twice_converges_the_nested_stack_once(
    cv: Converge, reality: Reality
) -> None:
    """``apply --converge`` converges what a nested stack holds (it may have drifted
    unseen): once per traversal, however often the owner's resource is checked."""
    await cv.create_stack("outer", OUTER, files=FILES)
    nested = await _nested(cv)
    # Added by the update, after box, and held there by a hook: the traversal stays open.
    held = OUTER + "  later:\n    type: Test::Thing\n    depends_on: box\n"
    environment = {"resource_registry": {"resources": {"later": {"hooks": "pre-create"}}}}
    updated = await cv.update_stack(
        "outer", held, files=FILES, environments=[environment], converge=True, wait=False
    )
    assert updated.stack_status == "UPDATE_IN_PROGRESS"
    await eventually(lambda: paused_at(cv, "outer", "later", "pre-create"))
    converged = [
        "Stack CREATE started",
        "Stack CREATE completed successfully",
        "Stack UPDATE started",
        "Stack UPDATE completed successfully",
    ]
    assert await _stack_events(cv, nested.id) == converged

    await cv.engine.worker.check(await _box_check(cv, "outer"))  # delivered again
    assert await _stack_events(cv, nested.id) == converged
    await cv.clear_hook("outer", "later", "pre-create")
    stack = await cv.wait("outer")
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert await _stack_events(cv, nested.id) == converged
