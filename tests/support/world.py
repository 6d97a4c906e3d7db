"""The recorded test world and waiting helpers for acceptance scenarios.

``World`` is a resource type whose reality is a dict the test can read: scenarios assert on
what exists out there (which physical ids were kept, replaced, deleted), not on the
engine's own records.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from converge.api import Converge
from converge.core.schema import AttributeSchema, PropertySchema, PropertyType
from converge.engine.settings import EngineSettings
from converge.errors import PermanentFailure, ReplacementRequired
from converge.resources.base import AppliedState, Outcome, ResourceContext, ResourcePlugin


class Reality:
    """What exists, by physical id, plus the log of every action done to it."""

    def __init__(self) -> None:
        self.things: dict[str, dict[str, Any]] = {}
        self.log: list[tuple[str, str, str]] = []  # (action, resource name, physical id)
        self.gates: dict[str, asyncio.Event] = {}
        self.observing: asyncio.Event | None = None  # when set, observations wait for it
        self._ids = itertools.count(1)

    def new_id(self, name: str) -> str:
        return f"{name}-{next(self._ids)}"

    def by_name(self, name: str) -> dict[str, dict[str, Any]]:
        return {pid: props for pid, props in self.things.items() if props["__name__"] == name}

    def actions(self, action: str, name: str | None = None) -> list[str]:
        return [
            pid for act, res, pid in self.log if act == action and (name is None or res == name)
        ]


class WorldThing(ResourcePlugin):
    """A resource in the test world: ``value`` updates in place, ``fixed`` forces replacement."""

    type_name = "Test::Thing"
    properties_schema: ClassVar[Mapping[str, PropertySchema]] = {
        "value": PropertySchema(PropertyType.STRING, default="", update_allowed=True),
        "fixed": PropertySchema(PropertyType.STRING, default=""),
        "fail": PropertySchema(PropertyType.BOOLEAN, default=False, update_allowed=True),
        "replace_on_update": PropertySchema(
            PropertyType.BOOLEAN, default=False, update_allowed=True
        ),
        "gate": PropertySchema(PropertyType.STRING, default="", update_allowed=True),
        # a misbehaving plugin: asks for replacement from create (only update may)
        "replace_on_create": PropertySchema(PropertyType.BOOLEAN, default=False),
    }
    attributes_schema: ClassVar[Mapping[str, AttributeSchema]] = {
        "value": AttributeSchema("the value"),
        "id": AttributeSchema("the physical id"),
    }

    def __init__(self, reality: Reality) -> None:
        self.reality = reality

    async def _maybe_wait(self, properties: Mapping[str, Any]) -> None:
        gate = properties.get("gate")
        if gate:
            await self.reality.gates.setdefault(gate, asyncio.Event()).wait()

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        await self._maybe_wait(properties)
        if properties.get("fail"):
            raise PermanentFailure(f"Thing {ctx.resource_name} failed")
        if properties.get("replace_on_create"):
            raise ReplacementRequired(f"{ctx.resource_name} wants replacing already")
        pid = self.reality.new_id(ctx.resource_name)
        self.reality.things[pid] = {**properties, "__name__": ctx.resource_name}
        self.reality.log.append(("create", ctx.resource_name, pid))
        return Outcome(pid)

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        if properties.get("replace_on_update"):
            raise ReplacementRequired("asked to replace")
        await self._maybe_wait(properties)
        if properties.get("fail"):
            raise PermanentFailure(f"Thing {ctx.resource_name} failed")
        assert current.physical_id is not None
        self.reality.things[current.physical_id] = {**properties, "__name__": ctx.resource_name}
        self.reality.log.append(("update", ctx.resource_name, current.physical_id))
        return Outcome(current.physical_id)

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        if current.physical_id in self.reality.things:
            del self.reality.things[current.physical_id]
            self.reality.log.append(("delete", ctx.resource_name, current.physical_id))

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        if self.reality.observing is not None:
            await self.reality.observing.wait()
        thing = self.reality.things.get(current.physical_id or "")
        return None if thing is None else {k: v for k, v in thing.items() if k != "__name__"}

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Any
    ) -> Mapping[str, Any]:
        values = {"value": current.properties.get("value"), "id": current.physical_id}
        return {name: values[name] for name in names if name in values}


FAST = EngineSettings(sweep_interval=0.1, heartbeat_interval=0.5)

# Why a test of ``cv`` runs embedded only: worker processes cannot reach the test's Reality.
IN_MEMORY_REALITY = (
    "Test::Thing acts on the in-memory Reality of the test's own process, which worker "
    "processes cannot reach"
)


async def eventually(
    check: Callable[[], Awaitable[bool]], timeout: float = 10.0, interval: float = 0.02
) -> None:
    """Wait for a condition instead of counting steps or sleeping a fixed time."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(interval)


async def paused_at(cv: Converge, stack: str, resource: str, hook: str) -> bool:
    events = await cv.list_events(stack, resource_name=resource)
    return any(f"paused until Hook {hook}" in e.resource_status_reason for e in events)
