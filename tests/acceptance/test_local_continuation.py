"""Local continuation: a worker whose finish makes successors ready checks one of them
itself instead of sending it through the bus; the rest are sent, and a continued check
lost with its process is rescued by the sweeper like a lost message."""

from __future__ import annotations

from typing import Any

import pytest

from converge.api import Converge
from converge.core.traversal import GraphNode
from converge.engine.runtime import Engine
from converge.messages import CheckResource
from converge.records import CheckInputs, FinishedNode
from converge.resources.registry import PluginRegistry
from support.continuation import CountingBus, names, running
from support.world import Reality, eventually

CHAIN = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
  b: {type: Test::Thing, depends_on: a}
  c: {type: Test::Thing, depends_on: b}
"""

FAN_OUT = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
  b: {type: Test::Thing, depends_on: a}
  c: {type: Test::Thing, depends_on: a}
  d: {type: Test::Thing, depends_on: a}
"""


DIAMOND = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
  b: {type: Test::Thing, depends_on: a}
  c: {type: Test::Thing, depends_on: a}
  d: {type: Test::Thing, depends_on: [b, c]}
"""


def count_loads(monkeypatch: pytest.MonkeyPatch, engine: Engine) -> list[int]:
    """The resource ids whose check read its inputs with ``load_for_check``."""
    loaded: list[int] = []
    real_load = engine.ctx.store.load_for_check

    async def load(stack_id: str, node: GraphNode, *args: Any, **kwargs: Any) -> CheckInputs:
        loaded.append(node.resource_id)
        return await real_load(stack_id, node, *args, **kwargs)

    monkeypatch.setattr(engine.ctx.store, "load_for_check", load)
    return loaded


async def loaded_names(engine: Engine, stack_id: str, loaded: list[int]) -> list[str]:
    rows = {row.id: row.name for row in await engine.ctx.store.list_resources(stack_id)}
    return sorted(rows[rid] for rid in loaded)


async def test_a_continued_link_reads_its_inputs_with_the_finish_on_postgresql(
    database_url: str, registry: PluginRegistry, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL the finish that makes a chain's next link ready reads that link's
    stack and row too, and the continued check does not load them again: two statements
    a link (claim, finish) instead of three. SQLite loads them (an inline read)."""
    bus = CountingBus()
    async with running(database_url, registry, bus) as engine:
        loaded = count_loads(monkeypatch, engine)
        stack = await Converge(engine).create_stack("chain", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert names(reality) == ["a", "b", "c"]
        assert engine.continued_checks == 2
        postgresql = database_url.startswith("postgresql")
        expected = ["a"] if postgresql else ["a", "b", "c"]
        assert await loaded_names(engine, stack.id, loaded) == expected
        rows = await engine.ctx.store.list_resources(stack.id)
        assert {row.status for row in rows} == {"COMPLETE"}


async def test_a_continued_check_with_several_predecessors_loads_its_inputs(
    database_url: str, registry: PluginRegistry, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    """d waits for b and c: whichever finish makes it ready, d's check reads the reports
    after that commit (both of them), never from inside the finish."""
    bus = CountingBus()
    async with running(database_url, registry, bus) as engine:
        loaded = count_loads(monkeypatch, engine)
        stack = await Converge(engine).create_stack("diamond", DIAMOND)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert sorted(names(reality)) == ["a", "b", "c", "d"]
        found = await loaded_names(engine, stack.id, loaded)
        assert "d" in found
        if database_url.startswith("postgresql"):
            # a (sent), one of b and c (sent; the other was continued with its inputs), d
            assert len(found) == 3 and found.count("b") + found.count("c") == 1


async def test_a_chain_continues_in_the_worker_without_messages(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    bus = CountingBus()
    async with running(database_url, registry, bus) as engine:
        stack = await Converge(engine).create_stack("chain", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        # Only the leaf went through the bus: b and c were continued by the worker.
        assert len(bus.sent) == 1
        assert engine.continued_checks == 2
        assert names(reality) == ["a", "b", "c"]
        assert engine.sweeper_rescues == 0


async def test_without_continuation_every_link_is_a_message(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    bus = CountingBus()
    async with running(database_url, registry, bus, continue_locally=False) as engine:
        stack = await Converge(engine).create_stack("chain", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert len(bus.sent) == 3
        assert engine.continued_checks == 0
        assert names(reality) == ["a", "b", "c"]


async def test_a_fan_out_continues_one_successor_and_sends_the_others(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    bus = CountingBus()
    async with running(database_url, registry, bus) as engine:
        stack = await Converge(engine).create_stack("fan", FAN_OUT)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert engine.continued_checks == 1
        # a (the leaf), then two of b, c, d through the bus so other workers can take them.
        assert len(bus.sent) == 3
        assert sorted(names(reality)) == ["a", "b", "c", "d"]


async def test_a_worker_without_room_sends_its_successor(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    bus = CountingBus()
    async with running(database_url, registry, bus, max_concurrent_checks=1) as engine:
        stack = await Converge(engine).create_stack("chain", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert engine.continued_checks == 0
        assert len(bus.sent) == 3


@pytest.mark.timeout(60)
async def test_a_continued_check_lost_with_its_worker_is_rescued_by_the_sweeper(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    """The worker takes b's check after committing a's finish, then dies before running
    it: b is ready and unclaimed, as after a lost message, and the sweeper sends it."""
    bus = CountingBus()
    async with running(database_url, registry, bus, sweep_interval=0.05) as engine:
        continue_here = engine.ctx.check_here
        assert continue_here is not None
        abandoned: list[CheckResource] = []

        def dies_after_taking_the_first(
            message: CheckResource, inputs: CheckInputs | None = None
        ) -> bool:
            if not abandoned:
                abandoned.append(message)
                return True  # taken, never run
            return continue_here(message, inputs)

        engine.ctx.check_here = dies_after_taking_the_first
        stack = await Converge(engine).create_stack("lost", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert len(abandoned) == 1
        assert engine.sweeper_rescues >= 1
        # Each thing made once: the rescue re-sent the lost check, nothing ran twice.
        assert names(reality) == ["a", "b", "c"]


async def test_a_stopping_worker_hands_its_unfinished_continued_checks_back_to_the_bus(
    database_url: str, registry: PluginRegistry
) -> None:
    """As the broker gives back a stopping worker's unacknowledged messages: the checks it
    continued and has not finished go out for another worker, not to the sweeper."""
    bus = CountingBus()
    async with running(database_url, registry, bus) as engine:
        stack = await Converge(engine).create_stack("chain", CHAIN)
        record = await engine.ctx.store.get_stack(stack.id)
        row = (await engine.ctx.store.list_resources(stack.id))[0]
        message = CheckResource(stack.id, record.current_traversal, row.id, True)

        async def create_checks_ended() -> bool:
            # The stack is complete once its last check's commit is: that check may still
            # be ending (its traversal's purge) when the create returns.
            return not engine._continued

        await eventually(create_checks_ended)
        bus.sent.clear()
        assert engine.ctx.check_here is not None
        assert engine.ctx.check_here(message)
        # Stopped before the continued check finished.
    assert bus.sent == [message.to_dict()]


@pytest.mark.timeout(60)
async def test_a_continued_check_given_a_row_changed_since_loses_its_claim_once(
    postgres_url: str, registry: PluginRegistry, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    """a's finish reads b's row, and the row changes before b's check claims it: the
    claim (a compare-and-swap) is lost and the check ends, as after any load, without
    trying again on the row it was given; b, ready and unclaimed, is sent again by the
    sweeper and checked from a fresh read."""
    bus = CountingBus()
    async with running(postgres_url, registry, bus, sweep_interval=0.05) as engine:
        store = engine.ctx.store
        real_finish, real_update = store.finish_node, store.update_resource
        touched: list[int] = []
        claims: list[tuple[int, bool]] = []

        async def finish_then_touch(*args: Any, **kwargs: Any) -> FinishedNode:
            finished = await real_finish(*args, **kwargs)
            row = finished.next_check.row if finished.next_check is not None else None
            if row is not None and not touched:
                touched.append(row.id)
                assert await real_update(row.id, row.atomic_key, {"status_reason": "x"})
            return finished

        async def claim(resource_id: int, *args: Any, **kwargs: Any) -> Any:
            written = await real_update(resource_id, *args, **kwargs)
            claims.append((resource_id, written is not None))
            return written

        monkeypatch.setattr(store, "finish_node", finish_then_touch)
        monkeypatch.setattr(store, "update_resource", claim)
        loaded = count_loads(monkeypatch, engine)
        stack = await Converge(engine).create_stack("stale", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert names(reality) == ["a", "b", "c"]  # b made once
        (b,) = touched
        assert [won for rid, won in claims if rid == b] == [False, True]
        assert engine.sweeper_rescues >= 1
        assert b in loaded  # the second check read the row afresh
