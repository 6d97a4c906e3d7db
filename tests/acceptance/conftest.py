"""Acceptance fixtures: a converge in a temporary directory over a recorded world."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from converge.api import Converge
from converge.resources.registry import PluginRegistry, default_registry
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
