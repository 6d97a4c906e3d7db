"""An engine runs only the loops of its roles: a worker-only process never sweeps, a process
without the worker role never takes work, and every process says its roles in its row."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore
from converge.api import Converge
from converge.engine.runtime import Engine
from converge.errors import InvalidRequest
from converge.ports import WorkHandler


class RecordingBus(LocalBus):
    """The in-process bus, remembering whether anyone consumed work from it."""

    def __init__(self) -> None:
        super().__init__()
        self.consumed = False

    async def start(self, work_handler: WorkHandler) -> None:
        self.consumed = True
        await super().start(work_handler)


def _loop_names() -> set[str]:
    return {task.get_name() for task in asyncio.all_tasks()}


@pytest.mark.parametrize(
    ("roles", "consumes", "sweeps"),
    [
        (("engine", "worker"), True, True),
        (("worker",), True, False),
        (("engine",), False, True),
        ((), False, False),
    ],
)
async def test_the_loops_of_each_role(
    tmp_path: Path, roles: tuple[str, ...], consumes: bool, sweeps: bool
) -> None:
    store = SqlStore.open_file(tmp_path / "state.db")
    bus = RecordingBus()
    engine = Engine(store, bus, roles=roles)
    try:
        async with engine:
            assert bus.consumed is consumes
            assert ("converge-sweeper" in _loop_names()) is sweeps
            assert "converge-heartbeat" in _loop_names()  # every process is seen alive
            [service] = await store.list_services()
            assert service.roles == roles
    finally:
        await store.close()


def test_an_unknown_role_is_refused() -> None:
    store: Any = object()  # never reached
    with pytest.raises(ValueError, match="unknown roles \\['sweeper'\\]"):
        Engine(store, LocalBus(), roles=("sweeper",))


async def test_without_a_broker_the_handle_must_do_the_work(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest, match="needs the worker role"):
        async with Converge.embedded(tmp_path / "state.db", roles=("engine",)):
            pass


async def test_live_workers_are_those_with_the_role(tmp_path: Path) -> None:
    async with (
        Converge.embedded(tmp_path / "state.db") as cv,
        Converge.embedded(tmp_path / "state.db", roles=("worker",)) as worker,
    ):
        workers = {service.engine_id for service in await cv.live_services("worker")}
        engines = {service.engine_id for service in await cv.live_services("engine")}
        assert workers == {cv.engine.engine_id, worker.engine.engine_id}
        assert engines == {cv.engine.engine_id}
