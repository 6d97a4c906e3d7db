"""Updates started together, with random delays in the store's calls and the plugin's actions
to shuffle how their checks interleave: whichever way they do, the newest update wins, each
resource is one real thing, and every real thing has its row (nothing leaked, nothing lost).

Three leaks were found this way and each has a test of its own that stages it exactly
(``test_result_being_stored.py``, ``test_concurrent_applies.py``, the store's id contract
test). The seeds here are a net for the next one, not a proof that there is none.
"""

from __future__ import annotations

import asyncio
import functools
import random
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from converge.adapters.sql.store import SqlStore
from converge.api import Converge
from converge.errors import ConvergeError, NotFound, Superseded
from converge.resources.builtin.world import SETTING, TestWorld
from converge.views import StackView
from support.templates import CHAIN
from support.world import Reality, WorldThing

# What a check does with the store: each call may wait a little before and after.
STORE_CALLS = (
    "load_for_check",
    "get_stack",
    "get_resource",
    "update_resource",
    "add_replacement",
    "add_events",
    "finish_node",
    "count_reports",
    "start_traversal",
)
ROUNDS = 20


def _delayed(call: Callable[..., Awaitable[Any]], rng: random.Random) -> Any:
    @functools.wraps(call)
    async def delayed(*args: Any, **kwargs: Any) -> Any:
        if rng.random() < 0.5:
            await asyncio.sleep(rng.random() * 0.003)
        result = await call(*args, **kwargs)
        if rng.random() < 0.5:
            await asyncio.sleep(rng.random() * 0.003)
        return result

    return delayed


def _shuffled(cv: Converge, monkeypatch: pytest.MonkeyPatch, rng: random.Random) -> SqlStore:
    """Random delays in the store's calls and the test plugin's actions; the store."""
    store = cv.engine.ctx.store
    for name in STORE_CALLS:
        monkeypatch.setattr(store, name, _delayed(getattr(store, name), rng))
    for action in ("create", "update", "delete"):
        monkeypatch.setattr(WorldThing, action, _delayed(getattr(WorldThing, action), rng))
    return store


async def _update(cv: Converge, parameters: dict[str, str]) -> StackView | Superseded:
    try:
        return await cv.update_stack("r", CHAIN, parameters=parameters)
    except Superseded as exc:
        return exc


@pytest.mark.parametrize("seed", range(1, 7))
async def test_updates_started_together_leave_one_thing_per_resource_whatever_the_order(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    rng = random.Random(seed)
    store = _shuffled(cv, monkeypatch, rng)
    await cv.create_stack("r", CHAIN)
    fixed = "x"
    for round_ in range(ROUNDS):
        updates = []
        for k in range(rng.choice([2, 2, 3])):
            if rng.random() < 0.5:
                fixed = f"f{round_}-{k}"  # a and c are replaced
            parameters = {"v": f"v{round_}-{k}", "f": fixed}
            updates.append(asyncio.create_task(_update(cv, parameters)))
            await asyncio.sleep(rng.random() * 0.01)
        await asyncio.gather(*updates)
        stack = await cv.get_stack("r")
        assert stack.stack_status == "UPDATE_COMPLETE", (round_, stack.stack_status_reason)
        winner = stack.parameters["v"]
        for name, value in (
            ("a", winner),
            ("b", f"{winner}:{winner}"),
            ("c", f"{winner}:{winner}"),
        ):
            things = [p["value"] for p in reality.by_name(name).values()]
            assert things == [value], (round_, name)
        rows = await store.list_resources(stack.id)
        assert sorted(r.name for r in rows) == ["a", "b", "c"], round_
        assert {r.physical_resource_id for r in rows} == set(reality.things), round_


WORLD_CHAIN = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
  r: {type: boolean, default: false}
resources:
  a: {type: OS::Heat::TestResource, properties: {value: {get_param: v}, update_replace: {get_param: r}}}
  b: {type: OS::Heat::TestResource, properties: {value: {list_join: [':', [{get_attr: [a, output]}, {get_param: v}]]}}}
  c: {type: OS::Heat::TestResource, properties: {value: {get_attr: [b, output]}, update_replace: {get_param: r}}}
"""


async def test_updates_started_together_on_every_mode_leave_one_thing_per_resource(
    cv: Converge,
) -> None:
    """The same, on both modes (in the distributed one, two worker processes interleave
    the checks): ``TestResource`` keeps its things in the shared test world. In the
    distributed mode the ``cv`` fixture also asserts that the sweeper rescued nothing: this
    test found two lost hand-overs between an older update's finish and a newer update's
    check (see ``postgres_hot._CURRENT`` and ``StepsMixin._replacement_chain``)."""
    world = TestWorld(cv.engine.ctx.settings.plugin_settings[SETTING])
    name = f"shuffled-{uuid.uuid4().hex[:8]}"
    rng = random.Random(7)
    await cv.create_stack(name, WORLD_CHAIN)
    for round_ in range(20):
        updates = []
        for k in range(rng.choice([2, 3])):
            parameters = {"v": f"v{round_}-{k}", "r": rng.random() < 0.5}
            updates.append(asyncio.create_task(_update_world(cv, name, parameters)))
            await asyncio.sleep(rng.random() * 0.01)
        await asyncio.gather(*updates)
        stack = await cv.get_stack(name)
        assert stack.stack_status == "UPDATE_COMPLETE", (round_, await _last_events(cv, name))
        winner = stack.parameters["v"]
        things = {
            pid: entity
            for pid, entity in world.all_of("OS::Heat::TestResource").items()
            if pid.startswith(f"{name}-")
        }
        rows = await cv.list_resources(name)
        assert sorted(r.resource_name for r in rows) == ["a", "b", "c"], round_
        assert {r.physical_resource_id for r in rows} == set(things), round_
        wanted = {"a": winner, "b": f"{winner}:{winner}", "c": f"{winner}:{winner}"}
        for row in rows:
            assert (
                things[row.physical_resource_id]["properties"]["value"] == wanted[row.resource_name]
            )


async def _update_world(
    cv: Converge, name: str, parameters: dict[str, Any]
) -> StackView | Superseded:
    try:
        return await cv.update_stack(name, WORLD_CHAIN, parameters=parameters)
    except Superseded as exc:
        return exc


async def _last_events(cv: Converge, name: str) -> list[tuple[str, str, str]]:
    events = (await cv.list_events(name))[-30:]
    return [(e.resource_name, e.resource_status, e.resource_status_reason) for e in events]


FAILING = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
  f: {type: string, default: x}
  fail_b: {type: boolean, default: false}
resources:
  a: {type: Test::Thing, properties: {value: {get_param: v}, fixed: {get_param: f}}}
  b: {type: Test::Thing, properties: {value: {get_attr: [a, value]}, fail: {get_param: fail_b}}}
  c: {type: Test::Thing, properties: {value: {get_attr: [b, value]}, fixed: {get_param: f}}}
"""


def _operation(cv: Converge, rng: random.Random, label: str) -> Awaitable[Any]:
    """One of every kind of operation on stack r, as a user might start it."""
    kind = rng.choices(["update", "delete", "cancel", "check", "create"], [10, 2, 2, 2, 1])[0]
    if kind == "update":
        parameters = {"v": label, "f": rng.choice(["x", "y", label]), "fail_b": rng.random() < 0.1}
        rollback = rng.random() < 0.5
        return cv.update_stack("r", FAILING, parameters=parameters, disable_rollback=not rollback)
    if kind == "delete":
        return cv.delete_stack("r")
    if kind == "cancel":
        return cv.cancel_update("r")
    if kind == "check":
        return cv.check_stack("r")
    return cv.create_stack("r", FAILING, parameters={"v": label})


async def _outcome(operation: Awaitable[Any]) -> Any:
    try:
        return await operation
    except ConvergeError as exc:  # refused, superseded, failed: all are outcomes here
        return exc


@pytest.mark.parametrize("seed", range(1, 5))
async def test_operations_of_every_kind_started_together_leak_and_lose_nothing(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    """Updates (some failing, some rolling back), deletes, cancels, checks and creates of
    one stack, two or three at a time: once all have settled, every real thing has its row
    and every row with a physical id has its real thing."""
    rng = random.Random(seed)
    _shuffled(cv, monkeypatch, rng)
    await cv.create_stack("r", FAILING)
    for round_ in range(ROUNDS):
        started = []
        for k in range(rng.choice([2, 2, 3])):
            started.append(asyncio.create_task(_outcome(_operation(cv, rng, f"v{round_}-{k}"))))
            await asyncio.sleep(rng.random() * 0.01)
        outcomes = await asyncio.gather(*started)
        rows = await _settled_rows(cv)
        known = {row.physical_resource_id for row in rows if row.physical_resource_id}
        assert set(reality.things) == known, (round_, outcomes)
        if not rows:  # deleted: the next round has a stack to work on
            await _outcome(cv.create_stack("r", FAILING))


async def _settled_rows(cv: Converge) -> list[Any]:
    """The stack's rows once it and every action on its rows settled (none if deleted)."""
    deadline = asyncio.get_running_loop().time() + 20
    while True:
        try:
            stack = await cv.get_stack("r")
        except NotFound:
            return []
        rows = await cv.engine.ctx.store.list_resources(stack.id)
        if not stack.stack_status.endswith("IN_PROGRESS") and all(
            row.engine_id is None for row in rows
        ):
            return rows
        assert asyncio.get_running_loop().time() < deadline, stack.stack_status
        await asyncio.sleep(0.02)
