"""The worker: converge one graph node of a traversal, then report to its successors.

Loads what it needs, asks the pure decision what must happen, runs the plugin action under
the operation's deadline, stores the result and reports it through the successors' sync
points, all in short transactions. Every step is safe to repeat: a duplicate message finds
the work done and only re-announces it; a message for a superseded traversal is dropped.

``Worker`` is the entry (``check``) over one mixin per concept, on ``WorkerBase``
(``base.py``): ``update_phase.py``, ``cleanup_phase.py``, ``replacements.py``,
``observing.py``, ``steps.py`` (what both phases do) and ``plugin_calls.py``; ``rows.py``
holds what the worker reads from and writes to a row. This module composes the worker.
"""

from __future__ import annotations

from converge.core.states import Action, Status
from converge.core.traversal import GraphNode
from converge.engine import host_binding
from converge.engine.check import ResourceChecker
from converge.engine.context import EngineContext
from converge.engine.failure import ActionFailed
from converge.engine.nested import NestedStackService
from converge.engine.operations import StackOperations
from converge.engine.worker.base import _Acting
from converge.engine.worker.claim_ahead import AheadClaim, AheadRow
from converge.engine.worker.cleanup_phase import CleanupPhaseMixin
from converge.engine.worker.observing import Observation
from converge.engine.worker.rows import resource_state, template_changed
from converge.engine.worker.update_phase import UpdatePhaseMixin
from converge.messages import CheckResource
from converge.records import CheckInputs
from converge.resources.base import Outcome


class Worker(UpdatePhaseMixin, CleanupPhaseMixin):
    """Checks one graph node at a time: the update or cleanup phase of a resource."""

    def __init__(self, ctx: EngineContext, operations: StackOperations) -> None:
        self.ctx = ctx
        self.operations = operations
        self.nested = NestedStackService(ctx, operations)
        self.checks = ResourceChecker(ctx, operations, self._drift_of)
        # Resource rows this process is acting on now, with the traversal acting on each.
        self._active: dict[int, _Acting] = {}
        self._claimed_ahead: dict[int, AheadClaim] = {}
        self._ahead_rows: dict[int, AheadRow] = {}
        self.claims_ahead = 0  # creates claimed by the finish of their predecessor

    def claimed_ahead_for(self, message: CheckResource, inputs: CheckInputs | None) -> bool:
        """Whether a finish here claimed this check's row for it (``claim_ahead.py``)."""
        plan = self._claimed_ahead.get(message.resource_id)
        return plan is not None and inputs is not None and plan.inputs is inputs

    # --- entry -------------------------------------------------------------------------

    async def check(self, message: CheckResource, inputs: CheckInputs | None = None) -> None:
        """Check one node. ``inputs``: its stack, row and reports as the finish that made
        it ready read them (a continued check on PostgreSQL), used instead of loading.
        A row claimed then is loaded again: the finish read it before its own commit, and
        the holder's release may have committed in between, handing the node on only to
        a check that reads after it (its hand-on counted the reports before this one's).
        A row that finish claimed for this very check (``claim_ahead.py``) is acted on
        at once."""
        node = GraphNode(message.resource_id, message.is_update)
        try:
            if self.claimed_ahead_for(message, inputs):
                await self._act_claimed_ahead(message, self._claimed_ahead.pop(node.resource_id))
                return
            await self._check(message, node, inputs)
        finally:
            self._ahead_rows.pop(message.resource_id, None)

    async def _check(
        self, message: CheckResource, node: GraphNode, inputs: CheckInputs | None
    ) -> None:
        graph = await self.ctx.graph(message.stack_id, message.traversal_id)
        if graph is None or node not in graph:
            return  # superseded: whoever holds the resource re-triggers it in the new one
        if inputs is None or inputs.row is None or inputs.row.engine_id is not None:
            inputs = await self.ctx.store.load_for_check(
                message.stack_id,
                node,
                message.traversal_id,
                with_reports=bool(graph.predecessors_of(node)),
            )
        stack, row, reports = inputs
        if stack.current_traversal != message.traversal_id or stack.status != Status.IN_PROGRESS:
            return
        if row is not None:
            on_host = await host_binding.on_this_host(self.ctx, message, row)
            if on_host is None:
                return  # another host's work: passed on to it
            row = on_host
        if row is None:
            if node.is_update:
                if node in await self.ctx.store.reported_senders(message.traversal_id):
                    # A repeated delivery of a node that converged, was replaced and whose
                    # old row its cleanup already deleted: nothing is left to do.
                    return
                await self.operations.fail_traversal(
                    stack.id, stack.current_traversal, f"resource row {node.resource_id} vanished"
                )
                return
            # Cleanup already done by an earlier delivery: announce it again.
            await self._finish(stack, graph, node, None, None)
            return
        if stack.action == Action.CHECK:
            found = await self.checks.check(stack, row)
            await self._finish(stack, graph, node, None, None, to_stack=found.to_payload())
            return
        if node.is_update:
            await self._update_phase(stack, graph, node, row, reports)
        else:
            await self._cleanup_phase(stack, graph, node, row)


# Imported from here by other modules, from before the worker was split by concept.
__all__ = ["ActionFailed", "Observation", "Outcome", "Worker", "resource_state", "template_changed"]
