"""Acceptance fixtures: a converge in a temporary directory over a recorded world."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from converge.api import Converge
from converge.resources.registry import PluginRegistry, default_registry
from support.amqp import delete_namespace
from support.distributed import Deployment
from support.world import FAST, Reality, WorldThing


@pytest.fixture
def reality() -> Reality:
    return Reality()


@pytest.fixture
def registry(reality: Reality) -> PluginRegistry:
    registry = default_registry()

    class BoundThing(WorldThing):
        def __init__(self) -> None:
            super().__init__(reality)

    registry.register(BoundThing, type_name="Test::Thing")
    return registry


@pytest.fixture
async def cv(tmp_path: Path, registry: PluginRegistry) -> AsyncIterator[Converge]:
    async with Converge.embedded(tmp_path / "state.db", settings=FAST, registry=registry) as handle:
        yield handle


@pytest.fixture
def deployment(postgres_url: str, rabbitmq_url: str, tmp_path: Path) -> Iterator[Deployment]:
    """A fresh PostgreSQL database and broker namespace for processes started by the test."""
    namespace = f"converge-test-{uuid.uuid4().hex[:10]}"
    shared = Deployment(postgres_url, rabbitmq_url, namespace, tmp_path)
    try:
        yield shared
    finally:
        shared.stop_all()
        asyncio.run(delete_namespace(rabbitmq_url, namespace, hosts=(socket.gethostname(),)))
