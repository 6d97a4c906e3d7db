"""The cleanup phase of a check: remove a resource the traversal no longer needs (deleted,
or retained by its deletion policy), with the replacements passed over on the way, after its
pre-delete hook."""

from __future__ import annotations

import dataclasses

from converge.core.decide import Change, Decision, decide_cleanup
from converge.core.states import Action, Status
from converge.core.traversal import GraphNode, TraversalGraph
from converge.engine.context import applied_state
from converge.engine.failure import ActionFailed
from converge.engine.worker.replacements import ReplacementsMixin
from converge.engine.worker.rows import _event, _is_cleared, _is_paused, _nothing_real
from converge.engine.worker.steps import StepsMixin
from converge.errors import ConvergeError
from converge.records import ResourceRecord, StackRecord


class CleanupPhaseMixin(StepsMixin, ReplacementsMixin):
    """Removing what a traversal no longer needs."""

    async def _cleanup_phase(
        self, stack: StackRecord, graph: TraversalGraph, node: GraphNode, row: ResourceRecord
    ) -> None:
        if await self._is_held_elsewhere(row) or _is_paused(row, stack.current_traversal):
            return
        is_current = GraphNode(row.id, True) in graph and row.replaced_by is None
        decision = self._cleanup_decision(stack, row, is_current=is_current)
        if decision.change == Change.NOTHING:
            await self._finish(stack, graph, node, None, None)
            return
        if decision.change == Change.DELETE and not _nothing_real(row):
            assert stack.raw_template_id is not None
            definition = await self.ctx.definitions.get(stack.raw_template_id)
            hook, traversal = "pre-delete", stack.current_traversal
            if hook in definition.hooks_for(row.name) and not _is_cleared(row, traversal, hook):
                await self._pause(stack, node, row, "pre-delete", Action.DELETE)
                return
        # A replacement made since the graph was built has no node of its own: it goes
        # with the row it replaced, or it would outlive the traversal. Only the last one of
        # a row this graph converges stands for the resource; a row the graph dropped takes
        # all of its new ones (a superseded traversal made them, replacing a row this one
        # no longer converges: the graph's row for the name is another).
        converged_here = GraphNode(row.id, True) in graph
        for passed_over in await self._replacements_since(graph, row):
            if passed_over.replaced_by is None and converged_here:
                continue  # the replacement that stands for the resource now
            if await self._is_held_elsewhere(passed_over):
                return  # its action ends with a retrigger of this traversal
            goes = self._cleanup_decision(stack, passed_over, is_current=False)
            if not await self._remove(stack, graph, node, passed_over, goes, report=False):
                return
        await self._remove(stack, graph, node, row, decision, report=True)

    def _cleanup_decision(
        self, stack: StackRecord, row: ResourceRecord, *, is_current: bool
    ) -> Decision:
        return decide_cleanup(
            is_current,
            row.deletion_policy,
            replaced=row.replaced_by is not None,
            stack_deleted=stack.action == Action.DELETE,
        )

    async def _remove(
        self,
        stack: StackRecord,
        graph: TraversalGraph,
        node: GraphNode,
        row: ResourceRecord,
        decision: Decision,
        *,
        report: bool,
    ) -> bool:
        """Delete (or, by its deletion policy, retain) the real thing, then drop the row;
        ``report``: this ends ``node``. False when it did not happen (held, failed)."""
        nothing_real = _nothing_real(row)
        if decision.change == Change.RETAIN or nothing_real:
            events = []
            if not nothing_real:
                events.append(
                    _event(
                        row,
                        Action.DELETE,
                        Status.COMPLETE,
                        decision.reason,
                        row.physical_resource_id,
                    )
                )
            return await self._finish(
                stack, graph, node, row, row.atomic_key, delete=True, events=events, report=report
            )
        plugin = await self._plugin_or_fail(stack, row, row.type, Action.DELETE)
        if plugin is None:
            return False
        # Marked before the claim is visible, unmarked once the result is stored (as a
        # create's or update's, see ``_act``): a check in between must not delete it again.
        acting = self._acting(row.id, stack.current_traversal)
        if acting is None:
            return False
        try:
            claimed = await self._claim(stack, row, Action.DELETE, decision.reason)
            if claimed is None:
                return False
            ctx = dataclasses.replace(
                self._context(stack, claimed),
                deletion_policy=await self._stated_deletion_policy(claimed),
            )
            try:
                await self._run(stack, claimed, plugin.delete, ctx, applied_state(claimed))
            except ActionFailed as failed:
                await self._fail_resource(
                    stack, claimed, Action.DELETE, failed.reason, release=acting
                )
                return False
            return await self._finish(
                stack,
                graph,
                node,
                claimed,
                claimed.atomic_key,
                delete=True,
                events=[
                    _event(
                        claimed,
                        Action.DELETE,
                        Status.COMPLETE,
                        "state changed",
                        claimed.physical_resource_id,
                    )
                ],
                report=report,
                release=acting,
            )
        finally:
            self._done(acting)

    async def _stated_deletion_policy(self, row: ResourceRecord) -> str | None:
        """The deletion_policy the template that last converged ``row`` wrote out; None when
        it left the default (or that template cannot be read: the safe answer)."""
        if row.current_template_id is None:
            return None
        try:
            definition = await self.ctx.definitions.get(row.current_template_id)
        except ConvergeError:
            return None
        resource = definition.resources.get(row.name)
        if resource is None or not resource.deletion_policy_stated:
            return None
        return resource.deletion_policy
