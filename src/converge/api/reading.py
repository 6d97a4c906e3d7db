"""Reading stacks: a stack, the list, its nested stacks and stored inputs, its resources
(with the types as the template wrote them), events, outputs and drift as last recorded."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from converge.adapters.sql.listing import ResourceListing
from converge.api.base import ConvergeBase
from converge.engine.drift_diff import drift_diffs
from converge.engine.operations import current_rows
from converge.errors import NotFound, TemplateError
from converge.records import ResourceRecord, ResourceSummary, StackRecord, TemplateRecord
from converge.views import DriftView, EventView, ResourceSummaryView, ResourceView, StackView


class ReadingMixin(ConvergeBase):
    """What a stack shows, as stored; changes nothing."""

    async def get_stack(self, name_or_id: str, *, include_deleted: bool = False) -> StackView:
        stack = await self._find(name_or_id, include_deleted=include_deleted)
        return await self._view(stack)

    async def list_stacks(
        self, *, show_nested: bool = False, include_deleted: bool = False
    ) -> list[StackView]:
        """The live stacks; nested stacks (made by provider templates) only if asked, or
        when their owner is gone (a nested stack kept by ``deletion_policy: Retain``)."""
        stacks = await self._store.list_stacks(self.project_id, include_deleted=include_deleted)
        live = {stack.id for stack in stacks}
        return [
            await self._view(stack)
            for stack in stacks
            if show_nested or stack.owner_id is None or stack.owner_id not in live
        ]

    async def nested_stacks(self, name_or_id: str, depth: int) -> list[StackView]:
        """The stacks nested in this one, ``depth`` levels down (1: its own children)."""
        stack = await self._find(name_or_id, include_deleted=True)
        every = await self._store.list_stacks(self.project_id)
        children: dict[str, list[StackRecord]] = {}
        for record in every:
            if record.owner_id is not None:
                children.setdefault(record.owner_id, []).append(record)
        found: list[StackView] = []
        level = [stack.id]
        for _ in range(max(depth, 0)):
            records = [child for parent in level for child in children.get(parent, [])]
            found.extend([await self._view(record) for record in records])
            level = [record.id for record in records]
        return found

    async def stored_inputs(self, name_or_id: str) -> TemplateRecord:
        """The template, environment, files and parameters the stack was last given."""
        stack = await self._find(name_or_id)
        if stack.raw_template_id is None:
            raise NotFound(f"stack {stack.name} has no template yet")
        return await self._store.get_template(stack.raw_template_id)

    async def list_resources(self, name_or_id: str) -> list[ResourceView]:
        stack = await self._find(name_or_id, include_deleted=True)
        rows = await self._store.list_resources(stack.id)
        return self._resource_views(rows, rows, await self._written_types(stack))

    async def list_resource_summaries(self, name_or_id: str) -> list[ResourceSummaryView]:
        """``list_resources`` without attributes and properties, at a fraction of its cost:
        what a listing shows (Heat's resource list without ``with_detail``)."""
        stack = await self._find(name_or_id, include_deleted=True)
        rows = await ResourceListing(self._sql()).of_stack(stack.id)
        written = await self._written_types(stack)
        required_by = _required_by(rows)
        views = []
        for row in rows:
            mapped = written.get(row.name)
            as_written = mapped[1] if mapped is not None and mapped[0] == row.type else None
            views.append(ResourceSummaryView.of(row, required_by.get(row.name, []), as_written))
        return views

    async def _written_types(self, stack: StackRecord) -> dict[str, tuple[str, str]]:
        """Per resource name, (implementation, type as written) where the template's
        environment mapped the type (an alias, a provider template): Heat shows the written
        one."""
        if stack.raw_template_id is None or stack.deleted:
            return {}
        try:
            definition = await self._ctx.definitions.get(stack.raw_template_id)
        except (NotFound, TemplateError):
            return {}
        return {
            name: (resource.implementation_type, resource.type)
            for name, resource in definition.resources.items()
            if resource.type != resource.implementation_type
        }

    def _resource_views(
        self,
        rows: Sequence[ResourceRecord],
        every: Sequence[ResourceRecord],
        written: Mapping[str, tuple[str, str]] | None = None,
    ) -> list[ResourceView]:
        """Views of ``rows``; ``every`` row of the stack says who requires whom; ``written``
        (from ``_written_types``) gives the types as the template wrote them."""
        required_by = _required_by(every)
        hidden_by_type: dict[str, frozenset[str]] = {}
        views = []
        for row in rows:
            hidden = hidden_by_type.get(row.type)
            if hidden is None:
                hidden = frozenset()
                if row.type in self._ctx.registry:
                    schema = self._ctx.registry.plugin(row.type).properties_schema
                    hidden = frozenset(n for n, p in schema.items() if p.hidden)
                hidden_by_type[row.type] = hidden
            mapped = (written or {}).get(row.name)
            as_written = mapped[1] if mapped is not None and mapped[0] == row.type else None
            views.append(ResourceView.of(row, required_by.get(row.name, []), hidden, as_written))
        return views

    async def list_events(
        self, name_or_id: str, *, resource_name: str | None = None, after_id: int | None = None
    ) -> list[EventView]:
        stack = await self._find(name_or_id, include_deleted=True)
        records = await self._store.list_events(
            stack.id, resource_name=resource_name, after_id=after_id
        )
        return [EventView.of(record) for record in records]

    async def outputs(self, name_or_id: str) -> list[dict[str, Any]]:
        stack = await self._find(name_or_id)
        return [dict(value) for value in stack.outputs.values()]

    async def drift(self, name_or_id: str, *, diffs: bool = False) -> list[DriftView]:
        """Each resource's drift as last recorded (by a check, an update or the observer).

        ``diffs``: also observe each modified resource whose type can show how it differs
        (a file's content diff instead of two digests), as ``drift_diff``.
        """
        stack = await self._find(name_or_id, include_deleted=True)
        rows = current_rows(await self._store.list_resources(stack.id), None)
        views = []
        for row in sorted(rows.values(), key=lambda r: r.name):
            view = DriftView.of(row)
            if diffs:
                shown = await drift_diffs(self._ctx, self.engine.worker, stack, row)
                view = dataclasses.replace(view, drift_diff=shown)
            views.append(view)
        return views


def _required_by(rows: Sequence[ResourceRecord | ResourceSummary]) -> dict[str, list[str]]:
    """Per resource name, the names of the rows that require it (a row's ``requires``
    holds row ids)."""
    names = {row.id: row.name for row in rows}
    required_by: dict[str, list[str]] = {}
    for row in rows:
        for required in row.requires:
            if required in names:
                required_by.setdefault(names[required], []).append(row.name)
    return required_by
