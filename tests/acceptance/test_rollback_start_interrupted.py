"""A failed operation's rollback must start even when the moment it starts is interrupted.

The failure used to be stored first and the rollback started after: a process killed in
between, or a database error at the rollback's start, left the stack FAILED, half
updated (the update's replacements kept beside the originals), with no rollback to come.
The chaos run found it (a failed update ended UPDATE_FAILED with two leaked files). Now
the failure is stored with the rollback's start, in one commit; a start that fails
leaves the traversal running, and the failed check tried again fails it again.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from converge.adapters.local_bus import LocalBus
from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.errors import StoreError
from converge.resources.registry import PluginRegistry
from support.engines import running_engine
from support.templates import FAILING_PAIR as TWO
from support.world import Reality, eventually, paused_at


def _interrupt_first_rollback_start(cv: Converge, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first start of a ROLLBACK traversal meets a lost database connection."""
    store = cv.engine.ctx.store
    start = store.start_traversal
    interrupted: list[str] = []

    async def start_traversal(stack_id: str, *args: Any, **kwargs: Any) -> Any:
        events = kwargs.get("events") or ()
        if not interrupted and any(e.action == "ROLLBACK" for e in events):
            interrupted.append(stack_id)
            raise StoreError("database error: server closed the connection unexpectedly")
        return await start(stack_id, *args, **kwargs)

    monkeypatch.setattr(store, "start_traversal", start_traversal)
    return interrupted


async def test_a_failed_update_rolls_back_when_its_rollback_start_is_interrupted(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cv.create_stack("s", TWO)
    before = set(reality.things)
    interrupted = _interrupt_first_rollback_start(cv, monkeypatch)
    stack = await cv.update_stack("s", TWO, parameters={"a_fixed": "two", "fail_b": True})
    assert interrupted, "the rollback's start was not reached"
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    # The update's replacement of a is gone: only the originals are left.
    assert set(reality.things) == before
    events = [e.resource_status for e in await cv.list_events("s") if e.resource_name == "s"]
    failed_at = events.index("UPDATE_FAILED")
    assert events[failed_at + 1] == "ROLLBACK_IN_PROGRESS"
    assert events.count("UPDATE_FAILED") == 1


async def test_a_failed_create_rolls_back_when_its_rollback_start_is_interrupted(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    interrupted = _interrupt_first_rollback_start(cv, monkeypatch)
    stack = await cv.create_stack("s", TWO, parameters={"fail_b": True})
    assert interrupted, "the rollback's start was not reached"
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    assert reality.things == {}


async def test_two_failures_of_one_traversal_at_once_start_one_rollback(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    """Two workers failing the same update at the same moment (two resources failed):
    one failure event, one rollback, on SQLite and on PostgreSQL."""
    quiet = EngineSettings(sweep_interval=3600.0)
    async with running_engine(database_url, registry, LocalBus(), quiet) as engine:
        cv = Converge(engine)
        await cv.create_stack("s", TWO)
        # The update pauses before updating b: its traversal stays current meanwhile.
        hook = "resource_registry:\n  resources:\n    b:\n      hooks: pre-update\n"
        await cv.update_stack(
            "s", TWO, parameters={"b_value": "two"}, environments=[hook], wait=False
        )
        await eventually(lambda: paused_at(cv, "s", "b", "pre-update"))
        stack = await engine.ctx.store.get_stack((await cv.get_stack("s")).id)
        fail = engine.operations.fail_traversal
        await asyncio.gather(
            fail(stack.id, stack.current_traversal, "b failed"),
            fail(stack.id, stack.current_traversal, "b failed"),
        )
        settled = await asyncio.wait_for(cv.wait("s"), 20)
        assert settled.stack_status == "ROLLBACK_COMPLETE", settled.stack_status_reason
        states = [e.resource_status for e in await cv.list_events("s") if e.resource_name == "s"]
        assert states.count("UPDATE_FAILED") == 1
        assert states.count("ROLLBACK_IN_PROGRESS") == 1
