"""OS::Heat::None: a placeholder that accepts anything, makes nothing and never changes.

Heat's semantics: any properties are accepted without validation; every attribute resolves
to None; the physical id is a UUID (derived from the row's physical name, so a create
interrupted after it recorded its thing and run again finds that thing instead of making a
second one: Heat's is random); an update never replaces and never acts (Heat's
``_needs_update`` is always False), even where the stubbed-out type would have been replaced.
In the test world (``converge.resources.builtin.world``) it is only there or gone: its
essence is empty.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any

from converge.core.schema import ResourceTypeSchema
from converge.resources.base import AppliedState, Outcome, ResourceContext
from converge.resources.builtin.world_backed import WorldBacked

# Physical ids are UUIDs in this namespace, named by the row's physical name.
_NAMESPACE = uuid.UUID("6f1c3b2e-5a43-4c36-9e0b-1d9f6a0c2b71")


class NoneResource(WorldBacked):
    type_name = "OS::Heat::None"
    open_properties = True
    never_updates = True
    description = (
        "Enables easily disabling certain resources via the resource_registry: does nothing, "
        "accepts any properties and returns None for any attribute."
    )

    @classmethod
    def schema(cls) -> ResourceTypeSchema:
        return ResourceTypeSchema(
            type_name=cls.type_name,
            properties={},
            attributes={},
            description=cls.description,
            open_properties=True,
        )

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        physical_id = self._made_id(ctx)
        await self._record(ctx, physical_id, properties)
        return Outcome(physical_id)

    def _made_id(self, ctx: ResourceContext) -> str:
        return str(uuid.uuid5(_NAMESPACE, ctx.physical_name))

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        # Never replaced, never touched: the point of a placeholder.
        return Outcome(current.physical_id, current.data)

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        await self._forget(ctx, current.physical_id)

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        # A placeholder is only there or not: its properties never matter.
        return {}

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        return dict.fromkeys(names)
