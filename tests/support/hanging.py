"""A resource type whose observation hangs in a process started with ``HANG_OBSERVE=1``:
an engine killed in the middle of a CHECK (tests/acceptance/test_distributed_takeover.py)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from typing import Any

from converge.resources.base import AppliedState, ResourceContext
from converge.resources.builtin.none import NoneResource
from converge.resources.registry import PluginRegistry, default_registry

TYPE = "Test::HangingObserve"


class HangingObserve(NoneResource):
    type_name = TYPE

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        if os.environ.get("HANG_OBSERVE") == "1":
            await asyncio.Event().wait()  # until the process is killed
        return await super().observe(ctx, current)


def registry() -> PluginRegistry:
    registry = default_registry()
    registry.register(HangingObserve, type_name=TYPE)
    return registry
