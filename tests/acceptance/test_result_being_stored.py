"""A resource whose action is done but whose result is still being stored is still this
process's work: a check of its row in that moment (the same node delivered again, or a newer
update's check) must leave it alone, not take the claim for one left by a crash and act
again. Found by two updates started together: the newer one created a replacement again
while the older one stored its create, and the older one's thing was left behind."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from converge.api import Converge
from converge.errors import Superseded
from converge.messages import CheckResource
from converge.records import ResourceRecord
from converge.resources.base import AppliedState
from converge.views import StackView
from support.world import Reality, WorldThing, eventually

ONE = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing, properties: {value: one}}
"""

# Every update of v replaces a (``fixed`` cannot change in place).
REPLACED = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
resources:
  a: {type: Test::Thing, properties: {value: {get_param: v}, fixed: {get_param: v}}}
  b: {type: Test::Thing, properties: {value: {get_attr: [a, value]}}}
"""


async def _update(cv: Converge, v: str) -> StackView | Superseded:
    try:
        return await cv.update_stack("r", REPLACED, parameters={"v": v})
    except Superseded as exc:
        return exc


class StoringHeld:
    """Holds the first finish of a row that ``holds`` picks until ``release`` is set."""

    def __init__(
        self, cv: Converge, monkeypatch: pytest.MonkeyPatch, holds: Any, *, delete: bool = False
    ) -> None:
        self.storing, self.release = asyncio.Event(), asyncio.Event()
        self.row: ResourceRecord | None = None
        store = cv.engine.ctx.store
        finish_node = store.finish_node

        async def held(stack_id: str, traversal: str, node: Any, **kwargs: Any) -> Any:
            resource_id = kwargs.get("resource_id")
            deletes = bool(kwargs.get("delete_resource"))
            if not self.storing.is_set() and resource_id is not None and deletes == delete:
                row = await store.get_resource(resource_id)
                if row is not None and holds(row):
                    self.row = row
                    self.storing.set()
                    await self.release.wait()
            return await finish_node(stack_id, traversal, node, **kwargs)

        monkeypatch.setattr(store, "finish_node", held)
        self._cv = cv

    async def deliver_again(self, *, is_update: bool) -> None:
        """Check the held row's node again, as a repeated delivery of its message would."""
        assert self.row is not None
        stack = await self._cv.engine.ctx.store.get_stack(self.row.stack_id)
        again = CheckResource(stack.id, stack.current_traversal, self.row.id, is_update)
        await asyncio.wait_for(self._cv.engine.worker.check(again), 10)


def _checks_done(cv: Converge, monkeypatch: pytest.MonkeyPatch) -> list[CheckResource]:
    done: list[CheckResource] = []
    check = cv.engine.worker.check

    async def recorded(message: CheckResource, inputs: Any = None) -> None:
        await check(message, inputs)
        done.append(message)

    monkeypatch.setattr(cv.engine.worker, "check", recorded)
    return done


async def test_a_check_delivered_again_while_the_create_is_stored_creates_once(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = StoringHeld(cv, monkeypatch, lambda row: row.name == "a")
    create = asyncio.create_task(cv.create_stack("s", ONE))
    await asyncio.wait_for(held.storing.wait(), 10)
    await held.deliver_again(is_update=True)
    held.release.set()
    view = await asyncio.wait_for(create, 10)
    assert view.stack_status == "CREATE_COMPLETE", view.stack_status_reason
    assert len(reality.actions("create", "a")) == 1
    assert [p["value"] for p in reality.by_name("a").values()] == ["one"]


async def test_a_delete_delivered_again_while_it_is_stored_deletes_once(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cv.create_stack("s", ONE)
    deletes: list[str | None] = []  # every delete asked of the plugin, of a thing gone too
    delete = WorldThing.delete

    async def counted(self: WorldThing, ctx: Any, current: AppliedState) -> None:
        deletes.append(current.physical_id)
        await delete(self, ctx, current)

    monkeypatch.setattr(WorldThing, "delete", counted)
    held = StoringHeld(cv, monkeypatch, lambda row: row.name == "a", delete=True)
    destroy = asyncio.create_task(cv.delete_stack("s"))
    await asyncio.wait_for(held.storing.wait(), 10)
    await held.deliver_again(is_update=False)
    held.release.set()
    await asyncio.wait_for(destroy, 10)
    assert deletes == ["a-1"]
    assert reality.by_name("a") == {}


async def test_a_newer_update_leaves_the_replacement_alone_while_its_create_is_stored(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cv.create_stack("r", REPLACED)
    held = StoringHeld(cv, monkeypatch, lambda row: row.name == "a" and row.replaces is not None)
    done = _checks_done(cv, monkeypatch)
    older = asyncio.create_task(_update(cv, "first"))
    await asyncio.wait_for(held.storing.wait(), 10)  # a's replacement is made, being stored
    assert held.row is not None
    replacement_id, stack_id = held.row.id, held.row.stack_id
    newer = asyncio.create_task(_update(cv, "second"))

    async def newer_checked_the_replacement() -> bool:
        current = (await cv.engine.ctx.store.get_stack(stack_id)).current_traversal
        return any(
            m.traversal_id == current and m.resource_id == replacement_id and m.is_update
            for m in done
        )

    await eventually(newer_checked_the_replacement)
    held.release.set()
    assert isinstance(await older, Superseded)
    stack = await newer
    assert isinstance(stack, StackView)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    for name in ("a", "b"):
        assert [p["value"] for p in reality.by_name(name).values()] == ["second"], name
    # The original, the older update's replacement (once), the newer one's.
    assert len(reality.actions("create", "a")) == 3
    assert sorted(r.resource_name for r in await cv.list_resources("r")) == ["a", "b"]
