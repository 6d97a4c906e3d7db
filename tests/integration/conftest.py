"""Integration fixtures: an allowed root, plugin contexts, and cleanup of what tests start."""

from __future__ import annotations

import logging
import os
import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from converge.engine.clock import SystemClock
from converge.resources.base import ResourceContext
from converge.resources.local import procfs

MakeContext = Callable[..., ResourceContext]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    allowed = tmp_path / "root"
    allowed.mkdir()
    return allowed


@pytest.fixture
def make_context(root: Path) -> Iterator[MakeContext]:
    """Contexts with unique physical names; any process still marked with one is killed after."""
    names: list[str] = []

    def make(name: str = "res", settings: dict[str, object] | None = None) -> ResourceContext:
        physical = f"it-{name}-{uuid.uuid4().hex[:8]}"
        names.append(physical)
        return ResourceContext(
            stack_id="stack-it",
            stack_name="it",
            resource_name=name,
            physical_name=physical,
            clock=SystemClock(),
            deadline=None,
            logger=logging.getLogger("test"),
            allowed_roots=(root,),
            settings=settings or {},
        )

    yield make
    for physical in names:
        for identity, _ in procfs.find_marked(physical):
            os.killpg(identity.pid, signal.SIGKILL)
