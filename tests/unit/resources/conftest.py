"""Shared helpers for driving plugins directly: a virtual clock and a context factory."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from converge.resources.base import ResourceContext


class FakeClock:
    """Virtual time: ``sleep`` advances ``now`` at once and records what was asked."""

    def __init__(self) -> None:
        self.time = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.time

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.time += seconds
        await asyncio.sleep(0)  # still a suspension point, like a real sleep


MakeContext = Callable[..., ResourceContext]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_context(clock: FakeClock) -> MakeContext:
    def make(
        *,
        resource_name: str = "res",
        deadline: float | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> ResourceContext:
        return ResourceContext(
            stack_id="stack-id",
            stack_name="teststack",
            resource_name=resource_name,
            physical_name=f"teststack-{resource_name}-abcdefgh",
            clock=clock,
            deadline=deadline,
            logger=logging.getLogger("test"),
            settings=dict(settings or {}),
        )

    return make


@pytest.fixture
def ctx(make_context: MakeContext) -> ResourceContext:
    return make_context()
