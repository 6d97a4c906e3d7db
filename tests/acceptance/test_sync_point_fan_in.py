"""Fan-in on both databases: many resources finishing together trigger their dependent.

Thirty (and 250) ``OS::Heat::None`` finish at almost the same moment and all report to the one
resource that depends on them. On PostgreSQL, counting reports under READ COMMITTED let
every reporter see one report short, so nothing fired the dependent and only the sweeper
rescued the create. Here the create must finish by its own triggers: with no sweeper at
all, and with a fast sweeper that must never have had to rescue anything.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.builtin import world

FAN_IN = 30
ROUNDS = 6

TEMPLATE = "\n".join(
    [
        "heat_template_version: 2021-04-16",
        "resources:",
        *(f"  r{i}: {{type: OS::Heat::None}}" for i in range(FAN_IN)),
        "  last:",
        "    type: OS::Heat::None",
        f"    depends_on: [{', '.join(f'r{i}' for i in range(FAN_IN))}]",
    ]
)


def settings(tmp_path: Path, sweep_interval: float) -> EngineSettings:
    return EngineSettings(
        sweep_interval=sweep_interval,
        heartbeat_interval=0.5,
        plugin_settings={world.SETTING: str(tmp_path / "world.db")},
    )


async def create_rounds(cv: Converge) -> None:
    for round_ in range(ROUNDS):
        stack = await asyncio.wait_for(cv.create_stack(f"fan-in-{round_}", TEMPLATE), 30)
        assert stack.stack_status == "CREATE_COMPLETE", f"round {round_}: {stack.stack_status}"


async def test_fan_in_completes_without_a_sweeper(database_url: str, tmp_path: Path) -> None:
    async with Converge.open(database_url, settings=settings(tmp_path, 3600.0)) as cv:
        await create_rounds(cv)
        assert cv.engine.sweeper_rescues == 0


async def test_fan_in_needs_no_rescue_from_a_fast_sweeper(
    database_url: str, tmp_path: Path
) -> None:
    async with Converge.open(database_url, settings=settings(tmp_path, 0.05)) as cv:
        await create_rounds(cv)
        assert cv.engine.sweeper_rescues == 0


# Bigger than one group of a split counter (``FAN_IN_PART``, 64): ``last`` waits for
# three groups, the stack for two (``last`` and the independent ones are its sinks).
BIG_FAN_IN = 150
SINKS = 100
BIG_TEMPLATE = "\n".join(
    [
        "heat_template_version: 2021-04-16",
        "resources:",
        *(f"  r{i}: {{type: OS::Heat::None}}" for i in range(BIG_FAN_IN)),
        *(f"  s{i}: {{type: OS::Heat::None}}" for i in range(SINKS)),
        "  last:",
        "    type: OS::Heat::None",
        f"    depends_on: [{', '.join(f'r{i}' for i in range(BIG_FAN_IN))}]",
    ]
)


async def test_a_fan_in_counted_in_groups_completes_by_its_own_triggers(
    database_url: str, tmp_path: Path
) -> None:
    for sweep_interval in (3600.0, 0.05):
        async with Converge.open(database_url, settings=settings(tmp_path, sweep_interval)) as cv:
            for round_ in range(2):
                name = f"big-{sweep_interval}-{round_}"
                stack = await asyncio.wait_for(cv.create_stack(name, BIG_TEMPLATE), 60)
                assert stack.stack_status == "CREATE_COMPLETE", f"{name}: {stack.stack_status}"
            assert cv.engine.sweeper_rescues == 0
