"""Contexts for driving the Local types against a temporary allowed root."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from converge.engine.clock import SystemClock
from converge.resources.base import ResourceContext, ValidationContext

LocalContext = Callable[..., ResourceContext]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    allowed = tmp_path / "root"
    allowed.mkdir()
    return allowed


@pytest.fixture
def local_context(root: Path) -> LocalContext:
    def make(
        name: str = "res", row: str = "abcdefgh", stack_id: str = "stack-1"
    ) -> ResourceContext:
        return ResourceContext(
            stack_id=stack_id,
            stack_name="st",
            resource_name=name,
            physical_name=f"st-{name}-{row}",
            clock=SystemClock(),
            deadline=None,
            logger=logging.getLogger("test"),
            allowed_roots=(root,),
        )

    return make


@pytest.fixture
def validation(root: Path) -> ValidationContext:
    return ValidationContext(allowed_roots=(root,))
