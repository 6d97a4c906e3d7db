"""Safeguards that must hold across engine processes sharing PostgreSQL and RabbitMQ.

Two ``Converge`` handles in this process are two engines as far as the database and the
broker know; a third, killed with SIGKILL, runs in a child process.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from converge.api import Converge
from converge.core import shard
from converge.core.heal import HealPolicy
from converge.engine import liveness
from converge.errors import StoreError
from converge.messages import CheckResource
from converge.records import StackRecord
from support import hanging
from support.engines import fast, two_engines
from support.world import eventually

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

LONG = """
heat_template_version: 2021-04-16
resources:
  slow: {type: OS::Heat::TestResource, properties: {value: v, wait_secs: 3}}
  after: {type: OS::Heat::None, depends_on: slow}
"""
TWO = """
heat_template_version: 2021-04-16
resources:
  first: {type: OS::Heat::TestResource, properties: {value: v}}
  then: {type: OS::Heat::None, depends_on: first}
"""
DRIFTED = """
heat_template_version: 2021-04-16
resources:
  test: {type: OS::Heat::TestResource, properties: {value: hello}}
"""
CHECKED = "\n".join(
    [
        "heat_template_version: 2021-04-16",
        "resources:",
        *(f"  r{i}: {{type: {hanging.TYPE}}}" for i in range(3)),
    ]
)


async def test_long_work_held_by_one_engine_is_not_resent_by_another(
    postgres_url: str,
    rabbitmq_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Both engines sweep every second while actions run for 3 s on one of them: the
    owner of each stack's share sees the other's claim and re-sends nothing. (Sweeps closer
    together than a message takes from the queue to its claim re-send work merely queued:
    0.1 s sweeps did in 2 runs of 8, 0.4 s ones in 2 of 10 on a loaded machine; the sweep
    interval is meant to be far longer than that.)"""
    caplog.set_level(logging.INFO, logger="converge.engine.runtime")
    settings = fast(tmp_path, sweep_interval=1.0)
    async with two_engines(postgres_url, rabbitmq_url, settings) as (first, second, _):

        async def both_know_both() -> bool:  # from the next heartbeat of the first one
            return (
                first.engine.sweepers == second.engine.sweepers and len(first.engine.sweepers) == 2
            )

        await eventually(both_know_both)
        ran_on = record_checks(monkeypatch, first, second)
        created = await asyncio.wait_for(
            asyncio.gather(*(first.create_stack(f"long-{i}", LONG) for i in range(12))), 60
        )
        assert {s.stack_status for s in created} == {"CREATE_COMPLETE"}
        # Some long actions ran on the engine that does not sweep their stack (else
        # this test would not test the claims).
        crossed = 0
        for stack in created:
            rows = await first.engine.ctx.store.list_resources(stack.id)
            (slow,) = [row.id for row in rows if row.name == "slow"]
            sweeper = shard.owner(stack.id, first.engine.sweepers)
            crossed += sum(cv.engine.engine_id != sweeper for cv in ran_on[slow])
        assert crossed
        rescued = [
            (r.stack, r.nodes, r.why)  # type: ignore[attr-defined]
            for r in caplog.records
            if r.getMessage() == "sweeper re-sends idle work"
        ]
        assert [first.engine.sweeper_rescues, second.engine.sweeper_rescues] == [0, 0], rescued


async def test_a_check_the_database_cut_short_is_checked_again_by_its_worker(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops as a worker stores a result: its claim stays in the row, and
    the worker is alive, so the sweeping engine (another process) leaves the node alone;
    the worker checks it again itself (found by the chaos test's dropped connections: the
    stack stayed CREATE_IN_PROGRESS)."""
    async with two_engines(
        postgres_url, rabbitmq_url, fast(tmp_path), roles=("engine",), second_roles=("worker",)
    ) as (engine, worker, _):
        real_finish = worker.engine.ctx.store.finish_node
        cut: list[Any] = []

        async def finish_once_cut(*args: Any, **kwargs: Any) -> Any:
            if not cut:
                cut.append(args)
                raise StoreError("database error: terminating connection")
            return await real_finish(*args, **kwargs)

        monkeypatch.setattr(worker.engine.ctx.store, "finish_node", finish_once_cut)

        async def worker_known() -> bool:
            return worker.engine.engine_id in engine.engine.ctx.live_engines

        await eventually(worker_known)
        created = await asyncio.wait_for(engine.create_stack("cut", TWO), 30)
        assert created.stack_status == "CREATE_COMPLETE"
        assert cut  # the first result was lost with the connection


def record_checks(monkeypatch: pytest.MonkeyPatch, *engines: Converge) -> dict[int, list[Converge]]:
    """Which engines checked each resource (by row id)."""
    ran_on: dict[int, list[Converge]] = {}
    for cv in engines:
        real_check = cv.engine.worker.check

        async def check(
            message: CheckResource, inputs: Any = None, _cv: Converge = cv, _real: Any = real_check
        ) -> None:
            ran_on.setdefault(message.resource_id, []).append(_cv)
            await _real(message, inputs)

        monkeypatch.setattr(cv.engine.worker, "check", check)
    return ran_on


async def test_a_stack_is_healed_by_one_engine_at_a_time(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While one engine is starting a heal, the other's heal of the same stack neither
    starts a second update nor counts the attempt again (no backoff: it would have)."""
    settings = fast(tmp_path, heal_policy=HealPolicy(base_delay=0.0, max_delay=0.0))
    async with two_engines(postgres_url, rabbitmq_url, settings) as (first, second, _):
        stack = await first.create_stack("s", DRIFTED, drift_policy="heal")
        store = first.engine.ctx.store
        (row,) = await store.list_resources(stack.id)
        assert await store.set_drift(row.id, {"drift_status": "MODIFIED", "drift_detail": {}})

        inside, go_on = asyncio.Event(), asyncio.Event()
        real_converge = first.engine.operations.converge

        async def held_converge(*args: object, **kwargs: object) -> StackRecord:
            inside.set()
            await go_on.wait()
            return await real_converge(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(first.engine.operations, "converge", held_converge)
        healing = asyncio.create_task(first.engine.drift.heal(stack.id))
        await asyncio.wait_for(inside.wait(), 10)
        assert await second.engine.drift.heal(stack.id) is None
        row = await store.get_resource(row.id)
        assert row is not None and row.heal_attempts == 1
        go_on.set()
        assert await asyncio.wait_for(healing, 10) is not None
        healed = await asyncio.wait_for(second.wait("s"), 30)
        assert healed.stack_status == "UPDATE_COMPLETE", healed.stack_status_reason
        reasons = [
            e.resource_status_reason for e in await second.list_events("s", resource_name="test")
        ]
        assert sum(r.startswith("Healing drift") for r in reasons) == 1
        # the lease was given back: the next heal (of new drift) may run on either engine
        assert await store.set_drift(row.id, {"drift_status": "MODIFIED", "drift_detail": {}})
        assert await second.engine.drift.heal(stack.id) is not None


_KILLED = """
import asyncio, sys
from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.builtin import world
from support import hanging

async def main(database, broker, namespace, world_path, template):
    settings = EngineSettings(plugin_settings={world.SETTING: world_path})
    async with Converge.open(
        database, settings=settings, registry=hanging.registry(),
        broker_url=broker, broker_namespace=namespace, roles=("worker",),
    ) as cv:
        await cv.create_stack("checked", template)
        await cv.check_stack("checked", wait=False)
        print("checking", flush=True)
        await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.skipif(not liveness.can_tell(), reason="needs Linux /proc")
async def test_a_check_survives_its_killed_worker_without_starting_again(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path
) -> None:
    """The only worker, in a child process, checks the plain resources and hangs
    observing the others when it is SIGKILLed. CHECK is a traversal: the nodes it never
    finished go to a worker started afterwards, the ones it finished are not observed
    again, and the stack ends CHECK_COMPLETE without a second "Stack CHECK started"."""
    template = "\n".join([CHECKED, *(f"  plain{i}: {{type: OS::Heat::None}}" for i in range(3))])
    settings = fast(tmp_path, sweep_interval=1.0)
    async with two_engines(postgres_url, rabbitmq_url, settings, roles=("engine",)) as (
        first,
        second,
        namespace,
    ):
        env = {**os.environ, "HANG_OBSERVE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
        args = [postgres_url, rabbitmq_url, namespace, str(tmp_path / "world.db"), template]
        child = subprocess.Popen(
            [sys.executable, "-c", _KILLED, *args], env=env, stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 60)
            assert line.strip() == "checking"

            async def plain_checked() -> bool:
                rows = await first.list_resources("checked")
                states = {r.resource_name: r.resource_status for r in rows}
                return all(states[f"plain{i}"] == "CHECK_COMPLETE" for i in range(3))

            await eventually(plain_checked, timeout=30)
            # The child's observations of the others hang: its check is half done.
            assert (await first.get_stack("checked")).stack_status == "CHECK_IN_PROGRESS"
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=30)
        finally:
            child.kill()
            child.communicate()
        async with Converge.open(
            postgres_url,
            settings=settings,
            registry=hanging.registry(),
            broker_url=rabbitmq_url,
            broker_namespace=namespace,
            roles=("worker",),
        ):

            async def checked() -> bool:
                return (await second.get_stack("checked")).stack_status == "CHECK_COMPLETE"

            await eventually(checked, timeout=30)
        events = await second.list_events("checked")
        stack_reasons = [e.resource_status_reason for e in events if e.resource_name == "checked"]
        assert stack_reasons.count("Stack CHECK started") == 1
        assert stack_reasons[-1] == "Stack CHECK completed successfully (6 in sync)"
        observed = [e.resource_name for e in events if e.resource_status == "CHECK_COMPLETE"]
        # Finished by the killed worker: never observed again.
        assert [observed.count(f"plain{i}") for i in range(3)] == [1, 1, 1]
        assert all(observed.count(f"r{i}") >= 1 for i in range(3))
        resources = await second.list_resources("checked")
        assert {r.resource_status for r in resources} == {"CHECK_COMPLETE"}


def files_template(directory: Path) -> str:
    """Six files (bound to the host that makes them) and six placeholders (any host)."""
    lines = ["heat_template_version: 2021-04-16", "resources:"]
    for i in range(6):
        lines += [
            f"  file{i}:",
            "    type: Local::File",
            f"    properties: {{path: '{directory / f'f{i}.txt'}', content: '{i}'}}",
            f"  any{i}: {{type: OS::Heat::None}}",
        ]
    return "\n".join(lines)


async def test_work_on_a_local_resource_runs_on_its_host(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Engines on hosts alpha and beta: the files a stack started on beta made are on beta,
    and only beta's worker acts on them; other work goes to either."""
    base = fast(tmp_path, allowed_roots=(tmp_path,))
    alpha, beta = (dataclasses.replace(base, host=host) for host in ("alpha", "beta"))
    async with two_engines(postgres_url, rabbitmq_url, alpha, beta) as (first, second, _):
        ran_on = record_checks(monkeypatch, first, second)
        template = files_template(tmp_path)
        for round_ in range(2):  # create, then delete: both phases stay on beta
            if round_ == 0:
                stack = await asyncio.wait_for(second.create_stack("files", template), 60)
                assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
                rows = await second.engine.ctx.store.list_resources(stack.id)
                local = {r.id for r in rows if r.type == "Local::File"}
                assert {r.host for r in rows if r.id in local} == {"beta"}
                assert {r.host for r in rows if r.id not in local} == {None}
                assert sorted(p.name for p in tmp_path.glob("f*.txt")) == [
                    f"f{i}.txt" for i in range(6)
                ]
            else:
                deleted = await asyncio.wait_for(first.delete_stack("files"), 60)
                assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
                assert list(tmp_path.glob("f*.txt")) == []
            assert all(ran_on[row_id] for row_id in local)
            assert all(cv is second for row_id in local for cv in ran_on[row_id]), "not on beta"
