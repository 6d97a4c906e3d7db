"""The base of the built-in test types: a plugin whose reality is its entry in the test world.

Apart from the world itself (``world.py``) because plugin modules are imported for their
schemas alone, by ``converge validate`` on every run: the world's SQLite store and asyncio
load with the first action on a resource (the imports inside the methods), not with the
schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from converge.resources.base import AppliedState, ObserverContext, ResourceContext, ResourcePlugin
from converge.resources.blocking import in_thread


class WorldBacked(ResourcePlugin):
    """A built-in test type whose reality is its entry in the test world.

    ``ignored_properties`` are knobs that steer the simulation (waits, failure switches):
    not part of the thing made, so not part of its essence.
    """

    ignored_properties: ClassVar[frozenset[str]] = frozenset()

    async def _record(
        self, ctx: ResourceContext, physical_id: str | None, properties: Mapping[str, Any]
    ) -> None:
        from converge.resources.builtin.world import put_entity, world_from

        world = world_from(ctx.settings)
        if world is not None and physical_id is not None:
            await world.call(put_entity, self.type_name, physical_id, properties)

    def _made_id(self, ctx: ResourceContext) -> str | None:
        """The physical id a create of this row records (None: not derived from the row)."""
        return ctx.physical_name

    async def _forget(self, ctx: ResourceContext, physical_id: str | None) -> None:
        from converge.resources.builtin.world import remove_entity, world_from

        if physical_id is None:
            # A create killed after it recorded its thing and before the row stored the
            # id: the row's own id finds that thing, which would otherwise leak.
            physical_id = self._made_id(ctx)
        world = world_from(ctx.settings)
        if world is not None and physical_id is not None:
            await world.call(remove_entity, self.type_name, physical_id)

    async def _find(self, ctx: ResourceContext, physical_id: str) -> dict[str, Any] | None:
        """What a previous, interrupted create left under this id (to adopt it)."""
        from converge.resources.builtin.world import get_entity, world_from

        world = world_from(ctx.settings)
        if world is None:
            return None
        return await world.call(get_entity, self.type_name, physical_id)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        from converge.resources.builtin.world import get_entity, world_from

        world = world_from(ctx.settings)
        if world is None:
            return dict(current.properties)
        entity = await world.call(get_entity, self.type_name, current.physical_id or "")
        return None if entity is None else dict(entity.get("properties") or {})

    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        from converge.resources.builtin.world import world_from

        world = world_from(ctx.settings)
        if world is None:
            return {}
        entities = await in_thread(world.all_of, self.type_name)
        return {pid: dict(entity.get("properties") or {}) for pid, entity in entities.items()}

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        """The properties of the thing, without the simulation's knobs (pure)."""
        known = None if self.open_properties else self.properties_schema
        return {
            name: value
            for name, value in live.items()
            if name not in self.ignored_properties and (known is None or name in known)
        }
