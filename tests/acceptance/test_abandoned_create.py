"""A create whose client died between storing the stack and starting its traversal (two
commits) is started by the sweeper, once; before, the stack said CREATE_IN_PROGRESS forever
and no process would ever act on it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from converge.adapters.local_bus import LocalBus
from converge.api import Converge
from converge.core.states import Action
from converge.core.template import load_template
from converge.core.template.environment import Environment
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.records import NewTemplate, StackRecord
from converge.resources.registry import PluginRegistry
from support.engines import running_engine
from support.templates import PAIR
from support.world import Reality


@pytest.fixture
async def quick_sweeper(database_url: str, registry: PluginRegistry) -> AsyncIterator[Engine]:
    """An engine (on SQLite, and on PostgreSQL) whose sweeper runs often and takes a
    process for dead after 0.3 s."""
    settings = EngineSettings(sweep_interval=0.05, engine_stale_after=0.3)
    async with running_engine(database_url, registry, LocalBus(), settings) as engine:
        yield engine


async def _stored_but_never_started(engine: Engine, name: str, template: str = PAIR) -> StackRecord:
    """What a client that died after its create's first commit leaves."""
    return await engine.ctx.store.create_stack(
        name,
        "default",
        action=Action.CREATE,
        disable_rollback=False,
        timeout_mins=None,
        drift_policy="notify",
        template=NewTemplate(load_template(template).data, Environment().to_data(), {}, {}),
    )


async def test_a_create_its_client_left_unstarted_is_started_by_the_sweeper(
    quick_sweeper: Engine, reality: Reality
) -> None:
    await _stored_but_never_started(quick_sweeper, "orphan")
    cv = Converge(quick_sweeper)
    stack = await asyncio.wait_for(cv.wait("orphan"), 20)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert sorted(name for _, name, _ in reality.log) == ["a", "b"]
    assert quick_sweeper.sweeper_rescues == 1


async def test_a_create_started_by_the_sweeper_is_not_started_again_by_its_slow_client(
    quick_sweeper: Engine, reality: Reality
) -> None:
    stored = await _stored_but_never_started(quick_sweeper, "slow")
    cv = Converge(quick_sweeper)
    settled = await asyncio.wait_for(cv.wait("slow"), 20)
    assert settled.stack_status == "CREATE_COMPLETE"
    started = (await quick_sweeper.ctx.store.get_stack(stored.id)).current_traversal
    # The client wakes up and starts its create as the API does: nothing is started again.
    assert stored.raw_template_id is not None
    definition = await quick_sweeper.ctx.definitions.get(stored.raw_template_id)
    again = await quick_sweeper.operations.converge(
        stored.id, stored.raw_template_id, definition, Action.CREATE, ending=""
    )
    assert again.current_traversal == started
    assert len(reality.actions("create")) == 2


async def test_a_stack_being_started_is_left_to_its_client(cv: Converge, reality: Reality) -> None:
    """With the default patience (a dead process's 30 s), a sweep right after the stack was
    stored does not start it: its client is about to."""
    stored = await _stored_but_never_started(cv.engine, "fresh")
    await cv.engine.sweep()
    await cv.engine.sweep()
    assert (await cv.engine.ctx.store.get_stack(stored.id)).current_traversal == ""
    assert reality.log == []


async def test_a_create_left_unstarted_that_cannot_be_prepared_fails_with_the_reason(
    quick_sweeper: Engine, reality: Reality
) -> None:
    """Its template no longer prepares here (a plugin this process lacks): the stack says
    so once, as a failed create does, instead of the sweeper trying at every sweep."""
    broken = "heat_template_version: 2021-04-16\nresources:\n  x: {type: No::Such}\n"
    await _stored_but_never_started(quick_sweeper, "broken", broken)
    stack = await asyncio.wait_for(Converge(quick_sweeper).wait("broken"), 20)
    assert stack.stack_status == "CREATE_FAILED"
    assert stack.stack_status_reason.startswith("Stack CREATE could not be started: ")
    assert "No::Such" in stack.stack_status_reason
    assert reality.log == []


async def test_two_starts_of_an_unstarted_create_at_once_start_one_traversal(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    """The sweeper and a slow client starting the same create at the same moment."""
    quiet = EngineSettings(sweep_interval=3600.0)
    async with running_engine(database_url, registry, LocalBus(), quiet) as engine:
        stored = await _stored_but_never_started(engine, "raced")
        assert stored.raw_template_id is not None
        definition = await engine.ctx.definitions.get(stored.raw_template_id)

        async def start() -> str:
            started = await engine.operations.converge(
                stored.id, stored.raw_template_id or 0, definition, Action.CREATE, ending=""
            )
            return started.current_traversal

        first, second = await asyncio.gather(start(), start())
        assert first == second != ""
        stack = await asyncio.wait_for(Converge(engine).wait("raced"), 20)
        assert stack.stack_status == "CREATE_COMPLETE"
        starts = [
            e
            for e in await engine.ctx.store.list_events(stored.id)
            if e.resource_name == "raced" and e.status == "IN_PROGRESS"
        ]
        assert len(starts) == 1
        assert len(reality.actions("create")) == 2
