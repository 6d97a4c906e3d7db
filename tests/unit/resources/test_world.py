"""The test world: plugin calls run on the event loop, joined per turn; a lock is waited for."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

from converge.resources.base import AppliedState, ResourceContext
from converge.resources.builtin.none import NoneResource
from converge.resources.builtin.random_string import RandomString
from converge.resources.builtin.testresource import HeatTestResource
from converge.resources.builtin.value import ValueResource
from converge.resources.builtin.world import (
    SETTING,
    TestWorld,
    get_entity,
    put_entity,
    remove_entity,
)


async def test_calls_change_the_world(tmp_path: Path) -> None:
    world = TestWorld(tmp_path / "world.db")
    await world.call(put_entity, "T", "p1", {"value": "a"})
    assert await world.call(get_entity, "T", "p1") == {"properties": {"value": "a"}}
    assert world.get("T", "p1") == {"properties": {"value": "a"}}  # the blocking face agrees
    assert await world.call(remove_entity, "T", "p1") is True
    assert await world.call(remove_entity, "T", "p1") is False


async def test_a_locked_world_is_waited_for_not_failed(tmp_path: Path) -> None:
    world = TestWorld(tmp_path / "world.db")
    await world.call(put_entity, "T", "p1", {"value": "a"})
    other = sqlite3.connect(world.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # `converge world` changing it from another process
    loop = asyncio.get_running_loop()
    loop.call_later(0.3, other.execute, "COMMIT")
    started = loop.time()
    await world.call(put_entity, "T", "p2", {"value": "b"})
    assert loop.time() - started >= 0.25
    other.close()
    assert world.get("T", "p2") == {"properties": {"value": "b"}}


async def test_a_world_in_a_new_directory_is_made(tmp_path: Path) -> None:
    world = TestWorld(tmp_path / "not" / "yet" / "world.db")
    await world.call(put_entity, "T", "p1", {"value": "a"})
    assert world.get("T", "p1") == {"properties": {"value": "a"}}


async def test_deleting_a_row_whose_create_was_interrupted_removes_what_it_made(
    tmp_path: Path, make_context: Callable[..., ResourceContext]
) -> None:
    """A worker killed after the create recorded its thing, before the row stored the id;
    then a rollback deletes the row (no physical id): the thing goes too, for every type
    whose id comes from the row."""
    world_file = tmp_path / "world.db"
    ctx = make_context(settings={SETTING: str(world_file)})
    for plugin in (HeatTestResource(), NoneResource(), ValueResource(), RandomString()):
        await plugin.create(ctx, {})
        assert TestWorld(world_file).all_of(plugin.type_name)
        await plugin.delete(ctx, AppliedState(None, {}))
        assert TestWorld(world_file).all_of(plugin.type_name) == {}, plugin.type_name
