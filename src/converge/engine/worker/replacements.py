"""Replacements: making the row that replaces a resource which cannot be updated in place,
and finding the replacements made since a traversal's graph was built (which the graph does
not know)."""

from __future__ import annotations

from converge.core.decide import Decision
from converge.core.states import Action, Status
from converge.core.template import ResourceDefinition
from converge.core.traversal import TraversalGraph
from converge.engine.worker.base import WorkerBase
from converge.engine.worker.rows import _event, _is_known_to
from converge.records import NewResource, ResourceRecord, StackRecord


class ReplacementsMixin(WorkerBase):
    """Making and finding the rows that replace a resource."""

    async def _make_replacement(
        self,
        stack: StackRecord,
        old: ResourceRecord,
        resource: ResourceDefinition,
        decision: Decision,
    ) -> ResourceRecord | None:
        made = await self.ctx.store.add_replacement(
            old,
            NewResource(
                name=old.name,
                type=resource.implementation_type,
                deletion_policy=resource.deletion_policy,
                replaces=old.id,
                host=old.host,  # made where the old one lives, by a worker of that host
            ),
            {},
        )
        if made is None:
            return None
        _updated_old, replacement = made
        await self.ctx.store.add_events(
            stack.id,
            [
                # As Heat marks it: the old resource's update is done, by replacement.
                _event(
                    old,
                    Action.UPDATE,
                    Status.COMPLETE,
                    f"The Resource {old.name} requires replacement: {decision.reason}",
                    old.physical_resource_id,
                )
            ],
        )
        return replacement

    async def _replacements_since(
        self, graph: TraversalGraph, row: ResourceRecord
    ) -> list[ResourceRecord]:
        """The replacements of ``row`` made since ``graph`` was built, oldest first: the
        chain of ``replaced_by`` through rows the graph does not know."""
        chain: list[ResourceRecord] = []
        seen = {row.id}
        current = row
        while current.replaced_by is not None and current.replaced_by not in seen:
            if _is_known_to(graph, current.replaced_by):
                break
            replacement = await self.ctx.store.get_resource(current.replaced_by)
            if replacement is None:
                break
            chain.append(replacement)
            seen.add(replacement.id)
            current = replacement
        return chain
