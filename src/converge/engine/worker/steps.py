"""The steps both phases of a check take: find the plugin (or fail the resource), claim a
row for this engine, pause it on a hook, finish a node (store its result and report it to
its successors), hand work finished for a superseded traversal to the current one, and fail
a resource (with the stack's hidden values masked in its reason)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge.core.states import Action, Status, check_resource_transition
from converge.core.traversal import STACK_NODE, GraphNode, TraversalGraph
from converge.engine.worker.base import _Acting
from converge.engine.worker.claim_ahead import AheadClaim, AheadRow
from converge.engine.worker.plugin_calls import PluginCallsMixin
from converge.engine.worker.rows import _event, _hook_marker, _jsonable_value, _kept_after_delete
from converge.errors import NotFound
from converge.records import NewEvent, ResourceRecord, StackRecord
from converge.resources.base import ResourcePlugin

# How far back a hand-over follows a replacement chain (rows replaced during one traversal
# by the traversals it superseded: a few at most).
_CHAIN_LIMIT = 16


class StepsMixin(PluginCallsMixin):
    """The steps shared by the update and the cleanup phase."""

    async def _plugin_or_fail(
        self, stack: StackRecord, row: ResourceRecord, type_name: str, action: Action
    ) -> ResourcePlugin | None:
        """The type's plugin; a type this engine does not know fails the resource (retrying
        would not help: another process's configuration made the stack)."""
        try:
            return self.ctx.registry.plugin(type_name)
        except NotFound as exc:
            reason = f"Error: resources.{row.name}: {exc}: this engine cannot act on it"
            await self._claim_and_fail(stack, row, action, reason)
            return None

    async def _claim_and_fail(
        self,
        stack: StackRecord,
        row: ResourceRecord,
        action: Action,
        reason: str,
        *,
        started: str | None = None,
    ) -> None:
        """Fail an action that cannot start (the transition table has no shortcut: started,
        with ``started`` as its reason, then failed), marked as this process's work
        throughout, as every claim is."""
        acting = self._acting(row.id, stack.current_traversal)
        if acting is None:
            return  # another action of this process holds the row: it decides
        try:
            claimed = await self._claim(stack, row, action, started or reason)
            if claimed is not None:
                await self._fail_resource(stack, claimed, action, reason, release=acting)
        finally:
            self._done(acting)

    async def _claim(
        self,
        stack: StackRecord,
        row: ResourceRecord,
        action: Action,
        reason: str,
        *,
        intent: Mapping[str, Any] | None = None,
    ) -> ResourceRecord | None:
        """Take the row for this engine (compare-and-swap) and mark the action started;
        ``intent`` holds columns to store with the claim (a create's properties, requires)."""
        changes, events = self._claim_columns(row, action, reason, intent)
        return await self.ctx.store.update_resource(
            row.id, row.atomic_key, changes, events=events, stack_id=stack.id, current=row
        )

    def _claim_columns(
        self,
        row: ResourceRecord,
        action: Action,
        reason: str,
        intent: Mapping[str, Any] | None,
    ) -> tuple[dict[str, Any], list[NewEvent]]:
        """What a claim writes to the row, and its event."""
        check_resource_transition(row.name, (row.action, row.status), (action, Status.IN_PROGRESS))
        changes: dict[str, Any] = {
            "engine_id": self.ctx.engine_id,
            "action": action,
            "status": Status.IN_PROGRESS,
            "status_reason": reason,
            "hook_pending": None,
        }
        if intent is not None:
            changes.update(intent)
        return changes, [_event(row, action, Status.IN_PROGRESS, reason, row.physical_resource_id)]

    async def _plan_ahead(
        self,
        stack: StackRecord,
        graph: TraversalGraph,
        sender: GraphNode,
        node: GraphNode,
        row: ResourceRecord,
        report: Mapping[str, Any],
    ) -> AheadClaim | None:
        """A create of ``node`` to claim with ``sender``'s finish, or None: the update
        phase decides it (``UpdatePhaseMixin``; ``claim_ahead.py``)."""
        return None

    async def _pause(
        self, stack: StackRecord, node: GraphNode, row: ResourceRecord, hook: str, action: Action
    ) -> None:
        await self.ctx.store.update_resource(
            row.id,
            row.atomic_key,
            {"hook_pending": _hook_marker(hook, stack.current_traversal, node)},
            events=[
                _event(
                    row,
                    action if row.action != Action.INIT else Action.INIT,
                    Status.COMPLETE if row.action == Action.INIT else row.status,
                    f"{action} paused until Hook {hook} is cleared",
                    row.physical_resource_id,
                )
            ],
            stack_id=stack.id,
        )

    async def _finish(
        self,
        stack: StackRecord,
        graph: TraversalGraph,
        node: GraphNode,
        row: ResourceRecord | None,
        expected_key: int | None,
        *,
        changes: Mapping[str, Any] | None = None,
        delete: bool = False,
        events: list[NewEvent] | None = None,
        report: bool = True,
        to_stack: Mapping[str, Any] | None = None,
        release: _Acting | None = None,
    ) -> bool:
        """Store the node's result and report it; False when the row changed under us.
        ``to_stack``: what the node tells the stack's sync point (a CHECK's findings).
        ``release``: this process's mark on the row, taken off once the result is stored
        and before the successors start (one of them may act on the same row)."""
        traversal = stack.current_traversal
        successors = graph.successors_of(node) if report else []
        payload = self._report_payload(row) if node.is_update and row is not None else {}
        reports = {
            successor: (
                dict(to_stack or {})
                if successor == STACK_NODE
                else payload
                if successor.is_update
                else {}
            )
            for successor in successors
        }
        expected = {successor: len(graph.predecessors_of(successor)) for successor in successors}
        fan_in = {
            successor: part
            for successor in successors
            if (part := graph.fan_in_part(successor, node)) is not None
        }
        # The successor this process would continue: the finish may read its inputs too,
        # claim it when its create was decided ahead, and read the row of the one after.
        next_node = self.ctx.next_to_continue(graph, node, successors)
        plan = None
        after = None
        if next_node is not None:
            ahead = self._ahead_rows.pop(node.resource_id, None)
            if ahead is not None and ahead.traversal == traversal and ahead.node == next_node:
                plan = await self._plan_ahead(
                    stack, graph, node, next_node, ahead.row, reports[next_node]
                )
            after = self.ctx.next_to_continue(graph, next_node, graph.successors_of(next_node))
        try:
            finished = await self.ctx.store.finish_node(
                stack.id,
                traversal,
                node,
                resource_id=row.id if row is not None else None,
                expected_key=expected_key,
                changes=changes,
                delete_resource=delete,
                events=events or [],
                reports=reports,
                expected_counts=expected,
                kept_if_superseded=_kept_after_delete(row) if delete and row is not None else None,
                fan_in=fan_in,
                load_next=next_node,
                claim_next=None if plan is None else plan.to_store(),
                read_ahead=after,
            )
        except BaseException:
            if plan is not None:
                self._done(plan.acting)
            raise
        stored, ready, current, next_check = finished[:4]
        if plan is not None and (
            finished.claimed_next is None or next_check is None or current != traversal
        ):
            self._done(plan.acting)
            plan = None
        if release is not None:
            self._done(release)
        if not stored:
            return False
        if current != traversal:
            if current:  # a newer traversal, not a failed one: hand the rows on to it
                ids = {node.resource_id} | await self._replacement_chain(row, node.resource_id)
                await self.retrigger(stack.id, current, ids)
            return True
        loaded = None if next_node is None or next_check is None else (next_node, next_check)
        if plan is not None:
            plan.claimed, plan.inputs = finished.claimed_next, next_check
            self._claimed_ahead[plan.row.id] = plan
            self.claims_ahead += 1
        if next_node is not None and after is not None and finished.ahead is not None:
            self._ahead_rows[next_node.resource_id] = AheadRow(traversal, after, finished.ahead)
        continued = None
        try:
            if STACK_NODE in ready:
                await self.operations.complete_traversal(stack.id, traversal)
            continued = await self.ctx.hand_on(
                stack.id, traversal, [s for s in ready if s != STACK_NODE], loaded=loaded
            )
        finally:
            if next_node is not None and continued != next_node:
                self._ahead_rows.pop(next_node.resource_id, None)
                if plan is not None and self._claimed_ahead.get(plan.row.id) is plan:
                    # Not taken here (the process stopping, or an error): given back.
                    del self._claimed_ahead[plan.row.id]
                    await self._give_back(stack.id, plan)
        return True

    async def _give_back(self, stack_id: str, plan: AheadClaim) -> None:
        """A claim made ahead that no check of this process will act on: the row is put
        back as it was read and handed to the stack's current traversal (a check sent
        meanwhile may have found it claimed, and left it to this process)."""
        assert plan.claimed is not None
        try:
            restored = {column: getattr(plan.row, column) for column in plan.changes}
            await self.ctx.store.update_resource(plan.claimed.id, plan.claimed.atomic_key, restored)
        finally:
            self._done(plan.acting)
        now = await self.ctx.store.get_stack(stack_id)
        await self.retrigger(stack_id, now.current_traversal, {plan.row.id})

    def _report_payload(self, row: ResourceRecord) -> dict[str, Any]:
        return {
            "name": row.name,
            "resource_id": row.id,
            "reference_id": _jsonable_value(self.ctx.reference_id(row)),
            "attributes": dict(row.attr_data),
        }

    async def _replacement_chain(self, row: ResourceRecord | None, until: int | None) -> set[int]:
        """``row`` and the rows it replaced, back to ``until`` (a node's own row): a newer
        traversal's graph may know any of them as the resource's row, and its check of
        that row may have found this one busy and left it to this action to hand on."""
        chain: set[int] = set()
        while row is not None and row.id not in chain and len(chain) < _CHAIN_LIMIT:
            chain.add(row.id)
            if row.id == until or row.replaces is None:
                break
            row = await self.ctx.store.get_resource(row.replaces)
        return chain

    async def retrigger(self, stack_id: str, traversal_id: str, resource_ids: set[int]) -> None:
        """After finishing work for a superseded traversal, hand it to the current one."""
        if not traversal_id:
            return
        graph = await self.ctx.graph(stack_id, traversal_id)
        if graph is None:
            return
        for resource_id in sorted(resource_ids):
            for is_update in (True, False):
                node = GraphNode(resource_id, is_update)
                if node not in graph:
                    continue
                received = await self.ctx.store.count_reports(traversal_id, node)
                if received >= len(graph.predecessors_of(node)):
                    await self.ctx.send_check(stack_id, traversal_id, node)

    async def _fail_resource(
        self,
        stack: StackRecord,
        row: ResourceRecord,
        action: Action,
        reason: str,
        *,
        release: _Acting | None = None,
    ) -> None:
        """Store the action's failure and fail the traversal; ``release`` as ``_finish``'s."""
        check_resource_transition(row.name, (row.action, row.status), (action, Status.FAILED))
        reason = await self._without_hidden_values(stack, row, reason)
        failed = await self.ctx.store.update_resource(
            row.id,
            row.atomic_key,
            {
                "action": action,
                "status": Status.FAILED,
                "status_reason": reason,
                "engine_id": None,
            },
            events=[_event(row, action, Status.FAILED, reason, row.physical_resource_id)],
            stack_id=stack.id,
        )
        if release is not None:
            self._done(release)
        if failed is None:
            return
        # Past the stack's deadline the operation failed because it timed out, whichever
        # of the deadline timer and this resource's own timeout fired first.
        timed_out = stack.deadline is not None and self.ctx.clock.now() >= stack.deadline
        await self.operations.fail_traversal(
            stack.id,
            stack.current_traversal,
            "Timed out" if timed_out else f"Resource {action} failed: {reason}",
        )
        current = await self.ctx.store.get_stack(stack.id)
        if current.current_traversal not in ("", stack.current_traversal):
            chain = await self._replacement_chain(row, None)
            await self.retrigger(stack.id, current.current_traversal, chain)

    async def _without_hidden_values(
        self, stack: StackRecord, row: ResourceRecord, reason: str
    ) -> str:
        """A failure's reason with the stack's hidden parameter values masked: a plugin's
        message may quote a value that came from one (a role name, a path)."""
        ids = {stack.raw_template_id, row.current_template_id}
        for template_id in sorted(i for i in ids if i is not None):
            reason = (await self.ctx.hidden_values(template_id)).scrub(reason)
        return reason
