"""The distributed setup: two engines over one PostgreSQL database and one RabbitMQ broker.

The engines compete for work on the broker's queue; a check is acknowledged only once its
result is stored, and sync points fire exactly once whichever engine reports last. The
sweeper is off: the create must finish by its own triggers.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.builtin import world
from support.amqp import delete_namespace

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

FAN_IN = 20
TEMPLATE = "\n".join(
    [
        "heat_template_version: 2021-04-16",
        "resources:",
        *(f"  r{i}: {{type: OS::Heat::None}}" for i in range(FAN_IN)),
        "  last:",
        "    type: OS::Heat::Value",
        "    properties: {value: {get_resource: r0}}",
        f"    depends_on: [{', '.join(f'r{i}' for i in range(1, FAN_IN))}]",
        "outputs:",
        "  value: {value: {get_attr: [last, value]}}",
    ]
)


@pytest.fixture
async def engines(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path
) -> AsyncIterator[list[Converge]]:
    """Two engines (two processes, as far as the database and the broker know)."""
    namespace = f"converge-test-{uuid.uuid4().hex[:10]}"
    settings = EngineSettings(
        sweep_interval=3600.0,
        heartbeat_interval=0.5,
        plugin_settings={world.SETTING: str(tmp_path / "world.db")},
    )

    def engine() -> contextlib.AbstractAsyncContextManager[Converge]:
        return Converge.open(
            postgres_url, settings=settings, broker_url=rabbitmq_url, broker_namespace=namespace
        )

    try:
        async with engine() as first, engine() as second:
            yield [first, second]
    finally:
        await delete_namespace(rabbitmq_url, namespace, hosts=(socket.gethostname(),))


async def test_two_engines_converge_a_fan_in_together(engines: list[Converge]) -> None:
    first, second = engines
    for round_ in range(3):
        name = f"fan-in-{round_}"
        stack = await asyncio.wait_for(first.create_stack(name, TEMPLATE), 60)
        assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
        # the other engine reads the same truth
        seen = await second.get_stack(name)
        assert seen.stack_status == "CREATE_COMPLETE"
        # last waited for every r_i and got r0's id through the sync point's reports
        ids = {r.resource_name: r.physical_resource_id for r in await second.list_resources(name)}
        [output] = await second.outputs(name)
        assert output["output_value"] == ids["r0"] and ids["r0"]
    assert [cv.engine.sweeper_rescues for cv in engines] == [0, 0]
    deleted = await asyncio.wait_for(second.delete_stack("fan-in-0"), 60)
    assert deleted.stack_status == "DELETE_COMPLETE"
