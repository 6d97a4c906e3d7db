"""Single resources: one resource shown with every attribute of its type resolved, its
metadata, and Heat's mark-unhealthy."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Sequence
from typing import Any

from converge.api.reading import ReadingMixin
from converge.core.states import Action, Status
from converge.engine.inputs import StoredData
from converge.engine.operations import current_rows
from converge.errors import Conflict, NotFound, TemplateError
from converge.records import NewEvent, ResourceRecord, StackRecord
from converge.views import ResourceView


class ResourcesMixin(ReadingMixin):
    """One resource of a stack: shown, its metadata resolved, marked (un)healthy."""

    async def get_resource(self, name_or_id: str, resource_name: str) -> ResourceView:
        """The current row of one resource (the newest when a replacement is under way)."""
        stack = await self._find(name_or_id, include_deleted=True)
        every = await self._store.list_resources(stack.id)
        row = self._newest_row(every, resource_name, stack.name)
        view = self._resource_views([row], every, await self._written_types(stack))[0]
        # As Heat's resource show: every attribute of the type, resolved.
        declared = await self._declared_attributes(stack, row)
        attributes = await self.engine.worker.every_attribute(stack, row, declared)
        return dataclasses.replace(view, attributes=attributes)

    async def _declared_attributes(self, stack: StackRecord, row: ResourceRecord) -> list[str]:
        """The attributes the resource's type declares as the template sees it (a provider
        template's outputs, for one); Heat's ``show`` attribute is left out."""
        schema = None
        if stack.raw_template_id is not None and not stack.deleted:
            with contextlib.suppress(NotFound, TemplateError):
                definition = await self._ctx.definitions.get(stack.raw_template_id)
                resource = definition.resources.get(row.name)
                schema = resource.schema if resource is not None else None
        if schema is not None:
            names = list(schema.attributes)
        elif row.type in self._ctx.registry:
            names = list(self._ctx.registry.plugin(row.type).attributes_schema)
        else:
            names = []
        return [name for name in names if name != "show"]

    @staticmethod
    def _newest_row(
        rows: Sequence[ResourceRecord], resource_name: str, stack_name: str
    ) -> ResourceRecord:
        named = [row for row in rows if row.name == resource_name]
        if not named:
            raise NotFound(f"stack {stack_name} has no resource {resource_name!r}")
        return max(named, key=lambda row: row.id)

    async def resource_metadata(self, name_or_id: str, resource_name: str) -> Any:
        """The resource's ``metadata`` section, resolved as the template says."""
        stack = await self._find(name_or_id)
        await self.get_resource(stack.id, resource_name)
        if stack.raw_template_id is None:
            return {}
        definition = await self._ctx.definitions.get(stack.raw_template_id)
        resource = definition.resources.get(resource_name)
        if resource is None or resource.metadata is None:
            return {}
        current = current_rows(await self._store.list_resources(stack.id), None)
        data = StoredData(
            {n: self._ctx.reference_id(r) for n, r in current.items()},
            {n: r.attr_data for n, r in current.items()},
        )
        try:
            return resource.resolve_metadata(data)
        except TemplateError as exc:
            raise Conflict(
                f"the metadata of {resource_name} needs values not known yet: {exc}"
            ) from exc

    async def mark_unhealthy(
        self, name_or_id: str, resource_name: str, unhealthy: bool, reason: str = ""
    ) -> None:
        """Heat's mark-unhealthy: CHECK_FAILED, so the next update replaces or re-applies it;
        ``unhealthy=False`` takes that back (CHECK_COMPLETE)."""
        stack = await self._find(name_or_id)
        if stack.status == Status.IN_PROGRESS:
            raise Conflict(
                f"stack {stack.name} is {stack.state}: mark {resource_name} once it settles"
            )
        row = self._newest_row(
            await self._store.list_resources(stack.id), resource_name, stack.name
        )
        if not unhealthy and row.action != Action.CHECK:
            return  # only a resource marked unhealthy (CHECK_FAILED) can be marked healthy
        status = Status.FAILED if unhealthy else Status.COMPLETE
        text = reason or ("marked unhealthy" if unhealthy else "marked healthy")
        done = await self._store.update_resource(
            row.id,
            row.atomic_key,
            {"action": str(Action.CHECK), "status": str(status), "status_reason": text},
            events=[
                NewEvent(
                    resource_name=row.name,
                    resource_type=row.type,
                    action=str(Action.CHECK),
                    status=str(status),
                    reason=text,
                    physical_resource_id=row.physical_resource_id,
                )
            ],
            stack_id=stack.id,
        )
        if done is None:
            raise Conflict(f"resource {resource_name} changed while being marked; try again")
