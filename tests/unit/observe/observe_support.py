"""Resource types whose reality the synchronizer tests control, a fake clock, stack rows.

``Inventory`` is the reality: a dict of physical id -> live properties that tests change
out of band. ``Listed`` can snapshot it (``list_all``), ``Observed`` can only observe what a
stack manages, ``Pushed`` observes and pushes hints through ``watch``, ``Hanging`` never
answers. Every type's essence drops the volatile ``mtime``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

from converge.adapters.sql.store import SqlStore
from converge.core.states import Action, Status
from converge.records import NewResource
from converge.resources.base import (
    AppliedState,
    ObserverContext,
    Outcome,
    ResourceContext,
    ResourcePlugin,
)
from converge.resources.registry import PluginRegistry


class FakeClock:
    """Virtual time: ``sleep`` returns when a test ``advance``s past its end."""

    def __init__(self, start: float = 1000.0) -> None:
        self._now = start
        self._changed = asyncio.Condition()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        until = self._now + max(0.0, seconds)
        async with self._changed:
            await self._changed.wait_for(lambda: self._now >= until)

    async def advance(self, seconds: float) -> None:
        self._now += seconds
        async with self._changed:
            self._changed.notify_all()
        for _ in range(5):  # let woken sleepers run
            await asyncio.sleep(0)


class Inventory:
    """The reality of one test type, plus what its plugins were asked."""

    def __init__(self) -> None:
        self.things: dict[str, dict[str, Any]] = {}
        self.hints: asyncio.Queue[str] = asyncio.Queue()
        self.calls: list[tuple[str, str]] = []  # (call, physical id or "*")
        self.release = asyncio.Event()  # what Hanging waits for
        self.broken: set[str] = set()  # physical ids whose observe raises

    def put(self, physical_id: str, **properties: Any) -> None:
        self.things[physical_id] = {"mtime": len(self.calls), **properties}

    def push(self, physical_id: str) -> None:
        self.hints.put_nowait(physical_id)


class _Base(ResourcePlugin):
    inventory: Inventory
    open_properties = True

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        raise NotImplementedError("tests make entities out of band")

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        self.inventory.things.pop(current.physical_id or "", None)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        pid = current.physical_id or ""
        self.inventory.calls.append(("observe", pid))
        if pid in self.inventory.broken:
            raise RuntimeError(f"cannot read {pid}")
        thing = self.inventory.things.get(pid)
        return None if thing is None else dict(thing)

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        return {key: value for key, value in live.items() if key != "mtime"}


class Listed(_Base):
    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        self.inventory.calls.append(("list_all", "*"))
        return {pid: dict(props) for pid, props in self.inventory.things.items()}


class Observed(_Base):
    pass


class Pushed(_Base):
    async def watch(
        self, ctx: ObserverContext, managed: Mapping[str, AppliedState]
    ) -> AsyncIterator[str]:
        self.inventory.calls.append(("watch", ",".join(sorted(managed))))
        while True:
            yield await self.inventory.hints.get()


class Hanging(_Base):
    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        self.inventory.calls.append(("list_all", "*"))
        await self.inventory.release.wait()
        return {}


def bind(plugin: type[_Base], inventory: Inventory) -> type[_Base]:
    """A plugin class over ``inventory`` (the registry makes instances without arguments)."""
    return type(plugin.__name__, (plugin,), {"inventory": inventory, "type_name": plugin.__name__})


def registry_of(**types: tuple[type[_Base], Inventory]) -> PluginRegistry:
    """``registry_of(**{"Test::Listed": (Listed, inventory)})``: only the given types."""
    registry = PluginRegistry()
    for name, (plugin, inventory) in types.items():
        registry.register(bind(plugin, inventory), type_name=name)
    return registry


async def add_managed(
    store: SqlStore,
    stack_name: str,
    resources: Mapping[str, tuple[str, str]],
) -> dict[str, tuple[str, int]]:
    """A live stack whose resources (name -> (type, physical id)) exist; name -> (stack, row)."""
    stack = await store.create_stack(
        stack_name,
        "p",
        action=Action.CREATE,
        disable_rollback=True,
        timeout_mins=None,
        drift_policy="notify",
    )
    started = await store.start_traversal(
        stack.id,
        stack.atomic_key,
        [NewResource(name=name, type=kind) for name, (kind, _) in resources.items()],
        lambda rows: ({"current_traversal": "t1"}, {}),
    )
    assert started is not None
    result: dict[str, tuple[str, int]] = {}
    for row in await store.list_resources(stack.id):
        _, physical_id = resources[row.name]
        updated = await store.update_resource(
            row.id,
            row.atomic_key,
            {
                "physical_resource_id": physical_id,
                "action": Action.CREATE,
                "status": Status.COMPLETE,
                "properties_data": {"name": row.name},
            },
        )
        assert updated is not None
        result[row.name] = (stack.id, row.id)
    return result
