"""The sweeper among several engines: each sweeps its share of the stacks, a dead engine's
share is picked up once its heartbeat is stale, and work a live engine holds is left alone.

The other engines are service rows (another process, as far as the database knows); this
engine's bus loses every work message, so only the sweeper can move a stack on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import sqlite_url
from converge.api import Converge
from converge.core import shard
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.records import ServiceRecord
from converge.resources.registry import PluginRegistry
from support.engines import running_engine

ONE = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
"""
STACKS = 30


class LosingBus(LocalBus):
    """Loses every work message, remembering which stacks they were for."""

    def __init__(self) -> None:
        super().__init__()
        self.lost: list[dict[str, Any]] = []

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.lost.append(message)

    def stacks_since(self, mark: int) -> set[str]:
        return {message["stack_id"] for message in self.lost[mark:]}


@pytest.fixture
async def engine(tmp_path: Path, registry: PluginRegistry) -> AsyncIterator[Engine]:
    # The loops are as good as off: the test sweeps and refreshes the live set itself.
    settings = EngineSettings(sweep_interval=3600.0, heartbeat_interval=3600.0)
    url = sqlite_url(tmp_path / "s.db")
    async with running_engine(url, registry, LosingBus(), settings) as engine:
        yield engine


async def other_process(engine: Engine, engine_id: str, roles: tuple[str, ...]) -> None:
    now = time.time()
    await engine.ctx.store.register_service(
        ServiceRecord(engine_id, "another-host", 1, roles, now, now)
    )
    await engine._refresh_live_engines()


async def sweep_until_stalled(engine: Engine) -> set[str]:
    """The stacks whose work the sweeps re-send once their traversals count as stalled:
    first seen, then ``sweep_patience`` sweeps without a new report (nothing runs here)."""
    bus = engine.ctx.bus
    assert isinstance(bus, LosingBus)
    mark = len(bus.lost)
    for _ in range(engine.ctx.settings.sweep_patience + 1):
        await engine.sweep()
    return bus.stacks_since(mark)


async def test_engines_sweep_their_share_and_take_a_dead_ones(engine: Engine) -> None:
    await other_process(engine, "ghost", ("engine", "worker"))
    assert engine.sweepers == {engine.engine_id, "ghost"}
    cv = Converge(engine)
    ids = {(await cv.create_stack(f"s{i}", ONE, wait=False)).id for i in range(STACKS)}
    mine = shard.share(ids, engine.engine_id, engine.sweepers)
    assert 0 < len(mine) < STACKS  # both engines have a share (30 random ids)

    assert await sweep_until_stalled(engine) == mine
    assert engine.sweeper_rescues == len(mine)

    # The ghost stops beating: once its heartbeat is stale, its share is this engine's
    # (nothing is queued on this bus: idle work is re-sent every other sweep).
    stale = time.time() - engine.ctx.settings.engine_stale_after - 1
    await engine.ctx.store.heartbeat("ghost", stale)
    await engine._refresh_live_engines()
    assert engine.sweepers == {engine.engine_id}
    assert await sweep_until_stalled(engine) == ids


async def test_a_process_that_does_not_sweep_has_no_share(engine: Engine) -> None:
    await other_process(engine, "a-worker", ("worker",))
    assert engine.sweepers == {engine.engine_id}
    cv = Converge(engine)
    ids = {(await cv.create_stack(f"s{i}", ONE, wait=False)).id for i in range(3)}
    assert await sweep_until_stalled(engine) == ids


async def test_work_claimed_by_a_live_engine_is_not_resent(engine: Engine) -> None:
    await other_process(engine, "busy", ("worker",))
    cv = Converge(engine)
    stack = await cv.create_stack("long", ONE, wait=False)
    (row,) = await engine.ctx.store.list_resources(stack.id)
    # Another engine claimed the resource (its action runs for long): nothing to re-send.
    claimed = await engine.ctx.store.update_resource(row.id, row.atomic_key, {"engine_id": "busy"})
    assert claimed is not None
    assert await sweep_until_stalled(engine) == set()
    assert engine.sweeper_rescues == 0

    # That engine dies: its claim no longer stands and the work is sent again at once.
    stale = time.time() - engine.ctx.settings.engine_stale_after - 1
    await engine.ctx.store.heartbeat("busy", stale)
    await engine._refresh_live_engines()
    bus = engine.ctx.bus
    assert isinstance(bus, LosingBus)
    mark = len(bus.lost)
    await engine.sweep()
    assert bus.stacks_since(mark) == {stack.id}
