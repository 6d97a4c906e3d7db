"""The worker: converge one graph node of a traversal, then report to its successors.

Loads what it needs, asks the pure decision what must happen, runs the plugin action under
the operation's deadline, stores the result and reports it through the successors' sync
points, all in short transactions. Every step is safe to repeat: a duplicate message finds
the work done and only re-announces it; a message for a superseded traversal is dropped.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from converge.core.decide import (
    MISSING,
    Change,
    Decision,
    ResourceState,
    decide_cleanup,
    decide_converging,
    restriction,
)
from converge.core.drift import Drift, DriftStatus, compare
from converge.core.states import Action, Status, check_resource_transition
from converge.core.template import ALL_ATTRIBUTES, ResourceDefinition
from converge.core.traversal import STACK_NODE, GraphNode, TraversalGraph
from converge.engine.check import ResourceChecker
from converge.engine.context import EngineContext, applied_state
from converge.engine.failure import ActionFailed
from converge.engine.inputs import ReportedData
from converge.engine.nested import NestedStackService
from converge.engine.operations import StackOperations
from converge.errors import (
    ConvergeError,
    NotFound,
    PermanentFailure,
    ReplacementRequired,
    RetryLater,
    TemplateError,
)
from converge.messages import CheckResource
from converge.records import NewEvent, NewResource, Report, ResourceRecord, StackRecord
from converge.resources.base import AppliedState, Outcome, ResourceContext, ResourcePlugin

log = logging.getLogger("converge.engine.worker")

T = TypeVar("T")


@dataclass(frozen=True)
class Observation:
    """A resource's observed reality, three ways."""

    essence: Mapping[str, Any] | None  # hashable core of reality; None: gone
    drift: Drift
    # What ``decide_update`` compares: live properties, None (gone) or MISSING (in sync).
    for_decision: Any


class Worker:
    def __init__(self, ctx: EngineContext, operations: StackOperations) -> None:
        self.ctx = ctx
        self.operations = operations
        self.nested = NestedStackService(ctx, operations)
        self.checks = ResourceChecker(ctx, operations, self._drift_of)
        # Resource rows this process is acting on now, with the traversal acting on each.
        self._active: dict[int, _Acting] = {}

    # --- entry -------------------------------------------------------------------------

    async def check(self, message: CheckResource) -> None:
        node = GraphNode(message.resource_id, message.is_update)
        graph = await self.ctx.graph(message.stack_id, message.traversal_id)
        if graph is None or node not in graph:
            return  # superseded: whoever holds the resource re-triggers it in the new one
        stack, row, reports = await self.ctx.store.load_for_check(
            message.stack_id,
            node,
            message.traversal_id,
            with_reports=bool(graph.predecessors_of(node)),
        )
        if stack.current_traversal != message.traversal_id or stack.status != Status.IN_PROGRESS:
            return
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

    # --- update phase ------------------------------------------------------------------

    async def _update_phase(
        self,
        stack: StackRecord,
        graph: TraversalGraph,
        node: GraphNode,
        row: ResourceRecord,
        reports: list[Report],
    ) -> None:
        assert stack.raw_template_id is not None  # set by every traversal start
        definition = await self.ctx.definitions.get(stack.raw_template_id)
        # Replaced since this traversal started (a replacement its graph does not know,
        # made by it or by the traversal it superseded): the last such replacement stands
        # for this node, however many there were. A replacement the graph knows is another
        # row's business (a dropped one is cleaned up).
        target = (await self._replacements_since(graph, row) or [row])[-1]
        resource = definition.resources.get(target.name)
        if resource is None:
            await self.operations.fail_traversal(
                stack.id, stack.current_traversal, f"resource {target.name} is not in the template"
            )
            return
        if await self._is_held_elsewhere(target):
            await self._preempt(stack, target)
            return
        if _is_paused(target, stack.current_traversal):
            return
        data = ReportedData(reports)
        action = Action.CREATE if target.action == Action.INIT else Action.UPDATE
        try:
            properties = resource.resolve_properties(data)
        except TemplateError as exc:
            # The action starts and fails at once (a settled row cannot fail unstarted).
            claimed = await self._claim(stack, target, action, "state changed")
            if claimed is not None:
                reason = f"Error: resources.{target.name}: {exc}"
                await self._fail_resource(stack, claimed, action, reason)
            return
        plugin = await self._plugin_or_fail(stack, target, resource.implementation_type, action)
        if plugin is None:
            return
        if _is_left_alone_by_heal(stack, target):
            needed = self._needed_attributes(definition.attributes_needed(), resource, plugin)
            requires = data.resource_ids()
            await self._settle_unchanged(stack, graph, node, target, resource, requires, needed)
            return
        observed: Any = MISSING
        drift: Drift | None = None
        if self._observes(stack, target, resource.implementation_type):
            try:
                observation = await self.observe_drift(stack, target)
                observed, drift = observation.for_decision, observation.drift
            except ActionFailed as failed:
                await self._fail_resource(stack, target, action, failed.reason)
                return
        decision = decide_converging(
            resource_state(target),
            resource.implementation_type,
            properties,
            plugin.properties_schema,
            open_properties=plugin.open_properties,
            never_updates=plugin.never_updates,
            observed=observed,
            drifted=None if drift is None else drift.status == DriftStatus.MODIFIED,
            converges_inside=plugin.converges_inside,
            template_changed=template_changed(target, resource),
        )
        restricted = restriction(decision, resource.restricted_actions, target.name)
        if restricted is not None:
            claimed = await self._claim(stack, target, Action.UPDATE, restricted)
            if claimed is not None:
                await self._fail_resource(stack, claimed, Action.UPDATE, restricted)
            return
        if drift is not None and drift.status != DriftStatus.IN_SYNC:
            await self.ctx.store.add_events(
                stack.id,
                [
                    _event(
                        target,
                        Action.CHECK,
                        Status.COMPLETE,
                        f"Drift found: {drift.describe()}; correcting it: {decision.change}",
                        target.physical_resource_id,
                    )
                ],
            )
        needed = self._needed_attributes(definition.attributes_needed(), resource, plugin)
        requires = data.resource_ids()
        if decision.change == Change.NOTHING:
            await self._settle_unchanged(
                stack,
                graph,
                node,
                target,
                resource,
                requires,
                needed,
                drift_checked=drift is not None,
            )
            return
        hook = "pre-create" if decision.change == Change.CREATE else "pre-update"
        if hook in resource.hooks and not _is_cleared(target, stack.current_traversal, hook):
            await self._pause(stack, node, target, hook, action)
            return
        if decision.change == Change.REPLACE:
            replacement = await self._make_replacement(stack, target, resource, decision)
            if replacement is None:
                return
            target, action = replacement, Action.CREATE
        elif decision.change == Change.CREATE:
            action = Action.CREATE
        await self._act(
            stack,
            graph,
            node,
            target,
            resource,
            plugin,
            action,
            properties,
            requires,
            needed,
            drift_checked=drift is not None,
        )

    async def every_attribute(
        self, stack: StackRecord, row: ResourceRecord, declared: Collection[str]
    ) -> dict[str, Any]:
        """Every ``declared`` attribute of the resource, resolved (Heat's resource show):
        those a template asked for are cached on the row, the rest asked of the plugin. An
        attribute the plugin cannot give now is left out."""
        attributes = dict(row.attr_data)
        missing = set(declared) - set(attributes)
        if not missing or row.physical_resource_id is None or row.type not in self.ctx.registry:
            return attributes
        plugin = self.ctx.registry.plugin(row.type)
        try:
            ctx = self._context(stack, row)
            fetched = await self._run(
                stack, row, plugin.attributes, ctx, applied_state(row), missing
            )
        except (ActionFailed, _Replace) as exc:
            log.info("attributes not available", extra={"resource": row.name, "error": str(exc)})
            return attributes
        return {**attributes, **_jsonable(fetched)}

    async def _preempt(self, stack: StackRecord, row: ResourceRecord) -> None:
        """A newer traversal finds the resource still busy with an older one. A resource
        whose real thing is a nested stack cancels that stack's operation (Heat's
        handle_preempt), so the older action ends and hands the resource on; any other
        waits for its action to finish."""
        acting = self._active.get(row.id)
        if acting is None or acting.traversal == stack.current_traversal:
            return  # held for this traversal, or by another process (for which, unknown)
        if row.status != Status.IN_PROGRESS or row.type not in self.ctx.registry:
            return
        if not self.ctx.registry.plugin(row.type).converges_inside:
            return
        await self.nested.preempt(self._context(stack, row), row.physical_resource_id)

    async def observe_drift(self, stack: StackRecord, row: ResourceRecord) -> Observation:
        """Observe a resource's reality: its essence, its drift, and what decisions compare.

        Raises ``ActionFailed`` when the plugin cannot say (error or timeout).
        """
        plugin = self.ctx.registry.plugin(row.type)
        try:
            live = await self._run(
                stack, row, plugin.observe, self._context(stack, row), applied_state(row)
            )
        except _Replace as exc:
            raise ActionFailed(f"Error: resources.{row.name}: {exc}") from exc
        except ActionFailed as failed:
            raise ActionFailed(f"{failed.reason} (while observing its reality)") from failed
        essence = None if live is None else dict(plugin.essence(live))
        hidden_values = await self.ctx.hidden_values(row.current_template_id)
        drift = compare(
            plugin.essence(row.properties_data),
            essence,
            _hidden_properties(plugin),
            hidden_values.conceals,
        )
        if drift.status == DriftStatus.IN_SYNC:
            return Observation(essence, drift, MISSING)  # decide as without reality
        if live is None:
            return Observation(None, drift, None)
        # The decision compares properties with properties: the live values of the
        # properties the type declares (the essence may hold derived fields instead).
        observed = {
            key: value
            for key, value in live.items()
            if plugin.open_properties or key in plugin.properties_schema
        }
        return Observation(essence, drift, observed)

    async def _drift_of(self, stack: StackRecord, row: ResourceRecord) -> Drift:
        return (await self.observe_drift(stack, row)).drift

    def _observes(self, stack: StackRecord, row: ResourceRecord, desired_type: str) -> bool:
        """Does this traversal compare this resource with its observed reality?"""
        if not (stack.converge or self.ctx.settings.observe_on_update):
            return False
        if stack.converge_names is not None and row.name not in stack.converge_names:
            return False  # a heal observes only the drifted resources
        if row.action == Action.INIT or row.physical_resource_id is None:
            return False  # nothing real yet
        # Failed, interrupted or retyped: the usual rules decide.
        return row.status == Status.COMPLETE and row.type == desired_type

    async def _act(
        self,
        stack: StackRecord,
        graph: TraversalGraph,
        node: GraphNode,
        target: ResourceRecord,
        resource: ResourceDefinition,
        plugin: ResourcePlugin,
        action: Action,
        properties: Mapping[str, Any],
        requires: frozenset[int],
        needed: frozenset[str],
        *,
        drift_checked: bool = False,
    ) -> None:
        """Claim the row, run create or update, store the result and report it."""
        while True:
            # Before a create, what it is made from is stored as its intent: a create that
            # fails or is interrupted before it records an id can still be found and
            # deleted (the server it was made on, the name it was given), after what it
            # depends on has been deleted in reverse order.
            intent = None
            if action == Action.CREATE and not target.physical_resource_id:
                intent = {"properties_data": dict(properties), "requires": requires}
            # Marked ours before the claim is visible: a repeated check of this row that
            # reads the claim must see this process at work, not a claim left by a crash.
            acting = self._acting(target.id, stack.current_traversal)
            if acting is None:
                return
            try:
                claimed = await self._claim(stack, target, action, "state changed", intent=intent)
            except BaseException:
                self._done(acting)  # a claim the database cut short must not mark it forever
                raise
            if claimed is None:
                self._done(acting)
                return
            try:
                ctx = dataclasses.replace(
                    self._context(stack, claimed), update_policy=resource.update_policy
                )
                applied = applied_state(claimed)
                try:
                    if action == Action.CREATE:
                        outcome = await self._run(stack, claimed, plugin.create, ctx, properties)
                    else:
                        outcome = await self._run(
                            stack, claimed, plugin.update, ctx, applied, properties
                        )
                    new_state = AppliedState(outcome.physical_id, properties, outcome.data)
                    attributes = (
                        await self._run(stack, claimed, plugin.attributes, ctx, new_state, needed)
                        if needed
                        else {}
                    )
                except _Replace as replace:
                    if action == Action.CREATE:
                        # Only ``update`` may ask for a replacement (plugin contract).
                        reason = f"Error: resources.{claimed.name}: {replace} (while creating)"
                        await self._fail_resource(stack, claimed, action, reason)
                        return
                    # The plugin cannot update in place: release this row, make a new one.
                    released = await self.ctx.store.update_resource(
                        claimed.id,
                        claimed.atomic_key,
                        {"engine_id": None, "action": target.action, "status": target.status},
                    )
                    if released is None:
                        return
                    decision = Decision(Change.REPLACE, str(replace))
                    replacement = await self._make_replacement(stack, released, resource, decision)
                    if replacement is None:
                        return
                    target, action = replacement, Action.CREATE
                    continue
                except ActionFailed as failed:
                    await self._fail_resource(stack, claimed, action, failed.reason)
                    return
            finally:
                self._done(acting)
            break
        post_hook = f"post-{str(action).lower()}"
        pause = post_hook in resource.hooks and not _is_cleared(
            claimed, stack.current_traversal, post_hook
        )
        check_resource_transition(
            claimed.name, (claimed.action, claimed.status), (action, Status.COMPLETE)
        )
        changes: dict[str, Any] = {
            "action": action,
            "status": Status.COMPLETE,
            "status_reason": "state changed",
            "physical_resource_id": _text(outcome.physical_id),
            "properties_data": dict(properties),
            "plugin_data": _with_template_digest(outcome.data, resource),
            "attr_data": _jsonable(attributes),
            "current_template_id": stack.raw_template_id,
            "requires": requires,
            "replaced_by": None,
            "engine_id": None,
            "type": resource.implementation_type,
            "deletion_policy": resource.deletion_policy,
            "hook_pending": None,
        }
        if drift_checked:
            changes.update(_IN_SYNC, drift_checked_at=self.ctx.clock.now())
        events = [_event(claimed, action, Status.COMPLETE, "state changed", outcome.physical_id)]
        if pause:
            changes["hook_pending"] = _hook_marker(post_hook, stack.current_traversal, node)
            events.append(
                _event(
                    claimed,
                    action,
                    Status.COMPLETE,
                    f"{action} paused until Hook {post_hook} is cleared",
                    outcome.physical_id,
                )
            )
        final = _with(claimed, changes)
        await self._finish(
            stack,
            graph,
            node,
            final,
            claimed.atomic_key,
            changes=changes,
            events=events,
            report=not pause,
        )

    async def _settle_unchanged(
        self,
        stack: StackRecord,
        graph: TraversalGraph,
        node: GraphNode,
        target: ResourceRecord,
        resource: ResourceDefinition,
        requires: frozenset[int],
        needed: frozenset[str],
        *,
        drift_checked: bool = False,
    ) -> None:
        attributes: Mapping[str, Any] = target.attr_data
        missing = needed - set(attributes)
        if missing:
            plugin = self.ctx.registry.plugin(target.type)
            fetched = await plugin.attributes(
                self._context(stack, target), applied_state(target), missing
            )
            attributes = {**attributes, **_jsonable(fetched)}
        changes: dict[str, Any] = {
            "current_template_id": stack.raw_template_id,
            "requires": requires,
            "replaced_by": None,
            "deletion_policy": resource.deletion_policy,
            "hook_pending": None,
            "attr_data": dict(attributes),
        }
        if drift_checked:
            changes.update(_IN_SYNC, drift_checked_at=self.ctx.clock.now())
        await self._finish(
            stack, graph, node, _with(target, changes), target.atomic_key, changes=changes
        )

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

    # --- cleanup phase -----------------------------------------------------------------

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
        # A replacement made since the graph was built and replaced again in it (the
        # superseded traversal made it, this one replaced it) has no node of its own: it
        # goes with the row it replaced, or it would outlive the traversal.
        for passed_over in await self._replacements_since(graph, row):
            if passed_over.replaced_by is None:
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
        acting = self._acting(row.id, stack.current_traversal)  # before the claim is visible
        if acting is None:
            return False
        try:
            claimed = await self._claim(stack, row, Action.DELETE, decision.reason)
        except BaseException:
            self._done(acting)  # a claim the database cut short must not mark it forever
            raise
        if claimed is None:
            self._done(acting)
            return False
        try:
            ctx = dataclasses.replace(
                self._context(stack, claimed),
                deletion_policy=await self._stated_deletion_policy(claimed),
            )
            await self._run(stack, claimed, plugin.delete, ctx, applied_state(claimed))
        except ActionFailed as failed:
            await self._fail_resource(stack, claimed, Action.DELETE, failed.reason)
            return False
        finally:
            self._done(acting)
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
        )

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

    # --- shared steps ------------------------------------------------------------------

    async def _plugin_or_fail(
        self, stack: StackRecord, row: ResourceRecord, type_name: str, action: Action
    ) -> ResourcePlugin | None:
        """The type's plugin; a type this engine does not know fails the resource (retrying
        would not help: another process's configuration made the stack)."""
        try:
            return self.ctx.registry.plugin(type_name)
        except NotFound as exc:
            reason = f"Error: resources.{row.name}: {exc}: this engine cannot act on it"
            # Started, then failed: the transition table has no shortcut.
            claimed = await self._claim(stack, row, action, reason)
            if claimed is not None:
                await self._fail_resource(stack, claimed, action, reason)
            return None

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
        return await self.ctx.store.update_resource(
            row.id,
            row.atomic_key,
            changes,
            events=[_event(row, action, Status.IN_PROGRESS, reason, row.physical_resource_id)],
            stack_id=stack.id,
            current=row,
        )

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
    ) -> bool:
        """Store the node's result and report it; False when the row changed under us.
        ``to_stack``: what the node tells the stack's sync point (a CHECK's findings)."""
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
        stored, ready, current = await self.ctx.store.finish_node(
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
        )
        if not stored:
            return False
        if current != traversal:
            ids = {node.resource_id} | ({row.id} if row is not None else set())
            await self.retrigger(stack.id, current, ids)
            return True
        if STACK_NODE in ready:
            await self.operations.complete_traversal(stack.id, traversal)
        await self.ctx.hand_on(stack.id, traversal, [s for s in ready if s != STACK_NODE])
        return True

    def _report_payload(self, row: ResourceRecord) -> dict[str, Any]:
        return {
            "name": row.name,
            "resource_id": row.id,
            "reference_id": _jsonable_value(self.ctx.reference_id(row)),
            "attributes": dict(row.attr_data),
        }

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
        self, stack: StackRecord, row: ResourceRecord, action: Action, reason: str
    ) -> None:
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
            await self.retrigger(stack.id, current.current_traversal, {row.id})

    async def _without_hidden_values(
        self, stack: StackRecord, row: ResourceRecord, reason: str
    ) -> str:
        """A failure's reason with the stack's hidden parameter values masked: a plugin's
        message may quote a value that came from one (a role name, a path)."""
        ids = {stack.raw_template_id, row.current_template_id}
        for template_id in sorted(i for i in ids if i is not None):
            reason = (await self.ctx.hidden_values(template_id)).scrub(reason)
        return reason

    async def _run(
        self,
        stack: StackRecord,
        row: ResourceRecord,
        call: Callable[..., Awaitable[T]],
        *args: Any,
    ) -> T:
        """Run one plugin call under the deadline, mapping the plugin error contract."""
        while True:
            try:
                async with asyncio.timeout(self._time_left(stack)):
                    return await call(*args)
            except ReplacementRequired as exc:
                raise _Replace(str(exc) or "the plugin requires replacement") from exc
            except RetryLater as exc:
                left = self._time_left(stack)
                if left is not None and left <= exc.delay:
                    raise ActionFailed(
                        f"Error: resources.{row.name}: {exc} (no time left to retry)"
                    ) from exc
                await self.ctx.clock.sleep(exc.delay)
            except PermanentFailure as exc:
                raise ActionFailed(exc.reason(row.name)) from exc
            except TimeoutError as exc:
                raise ActionFailed(f"Error: resources.{row.name}: Timed out") from exc
            except Exception as exc:
                log.exception("plugin bug", extra={"resource": row.name, "type": row.type})
                raise ActionFailed(f"{type(exc).__name__}: resources.{row.name}: {exc}") from exc

    def _time_left(self, stack: StackRecord) -> float | None:
        limits = []
        if stack.deadline is not None:
            limits.append(stack.deadline - self.ctx.clock.now())
        if self.ctx.settings.action_timeout is not None:
            limits.append(self.ctx.settings.action_timeout)
        return max(0.0, min(limits)) if limits else None

    def _context(self, stack: StackRecord, row: ResourceRecord) -> ResourceContext:
        short = hashlib.sha256(f"{stack.id}:{row.id}".encode()).hexdigest()[:8]
        deadline = None
        left = self._time_left(stack)
        if left is not None:
            deadline = self.ctx.clock.now() + left
        return ResourceContext(
            stack_id=stack.id,
            stack_name=stack.name,
            resource_name=row.name,
            physical_name=f"{stack.name}-{row.name}-{short}",
            clock=self.ctx.clock,
            deadline=deadline,
            logger=logging.LoggerAdapter(
                logging.getLogger("converge.resource"), {"stack": stack.name, "resource": row.name}
            ),
            allowed_roots=self.ctx.settings.allowed_roots,
            settings=self.ctx.settings.plugin_settings,
            nested=self.nested,
            converge=stack.converge,
        )

    def _needed_attributes(
        self,
        needed_by_name: Mapping[str, frozenset[str]],
        resource: ResourceDefinition,
        plugin: ResourcePlugin,
    ) -> frozenset[str]:
        needed = needed_by_name.get(resource.name, frozenset())
        if ALL_ATTRIBUTES in needed:
            # The template's view of the type: a provider template's outputs, for one.
            declared = (
                resource.schema.attributes
                if resource.schema is not None
                else plugin.attributes_schema
            )
            return (needed - {ALL_ATTRIBUTES}) | frozenset(declared)
        return needed

    def _acting(self, row_id: int, traversal: str) -> _Acting | None:
        """Mark the row as this process's work (for ``traversal``) until ``_done``; None
        when another action of this process holds it already (its claim may not be
        visible in the row yet): that one goes on, this check stops."""
        if row_id in self._active:
            return None
        acting = _Acting(row_id, traversal)
        self._active[row_id] = acting
        return acting

    def _done(self, acting: _Acting) -> None:
        """Unmark the row, unless a newer action of this process marked it since (a losing
        claim must not unmark the winner's work)."""
        if self._active.get(acting.row_id) is acting:
            del self._active[acting.row_id]

    async def _is_held_elsewhere(self, row: ResourceRecord) -> bool:
        if row.engine_id is None:
            return False
        if row.engine_id == self.ctx.engine_id:
            return row.id in self._active
        return await self.ctx.claim_stands(row.engine_id)


@dataclass(eq=False)
class _Acting:
    """One action of this process on a resource row (compared by identity)."""

    row_id: int
    traversal: str


class _Replace(Exception):
    pass


# What a resource's drift columns say once a traversal made its reality match.
_IN_SYNC: Mapping[str, Any] = {"drift_status": str(DriftStatus.IN_SYNC), "drift_detail": {}}


def _kept_after_delete(row: ResourceRecord) -> dict[str, Any]:
    """What a row becomes instead of being deleted when a newer traversal started
    meanwhile: that one may have chosen the row (a resource removed, then added back), and
    needs it to say the real thing is gone."""
    if row.action == Action.INIT:
        return {"engine_id": None}  # nothing real was ever made
    return {
        "action": Action.DELETE,
        "status": Status.COMPLETE,
        "status_reason": "deleted by an operation a newer one superseded",
        "physical_resource_id": None,
        "attr_data": {},
        "engine_id": None,
        "hook_pending": None,
    }


def _nothing_real(row: ResourceRecord) -> bool:
    """Never made, or already deleted: only the row is left to drop."""
    return row.action == Action.INIT or (
        row.action == Action.DELETE and row.status == Status.COMPLETE
    )


def _is_known_to(graph: TraversalGraph, resource_id: int) -> bool:
    return GraphNode(resource_id, True) in graph or GraphNode(resource_id, False) in graph


def _is_left_alone_by_heal(stack: StackRecord, row: ResourceRecord) -> bool:
    """A heal converges its drifted resources; one given up on (FAILED) stays as it is."""
    return (
        stack.converge_names is not None
        and row.name not in stack.converge_names
        and row.status == Status.FAILED
    )


def _hidden_properties(plugin: ResourcePlugin) -> frozenset[str]:
    return frozenset(name for name, prop in plugin.properties_schema.items() if prop.hidden)


def resource_state(row: ResourceRecord) -> ResourceState:
    """The parts of a stored row that the update decision looks at."""
    return ResourceState(
        action=row.action,
        status=row.status,
        type=row.type,
        properties=row.properties_data,
        current_template_id=row.current_template_id,
        has_physical_resource=row.physical_resource_id is not None,
    )


def _is_paused(row: ResourceRecord, traversal_id: str) -> bool:
    pending = row.hook_pending
    return bool(pending) and pending.get("traversal") == traversal_id  # type: ignore[union-attr]


def _is_cleared(row: ResourceRecord, traversal_id: str, hook: str) -> bool:
    return f"{traversal_id}:{hook}" in row.cleared_hooks


def _hook_marker(hook: str, traversal_id: str, node: GraphNode) -> dict[str, Any]:
    return {"hook": hook, "traversal": traversal_id, "node": node.encode()}


def _event(
    row: ResourceRecord, action: Action, status: Status, reason: str, physical_id: Any
) -> NewEvent:
    return NewEvent(
        resource_name=row.name,
        resource_type=row.type,
        action=str(action),
        status=str(status),
        reason=reason,
        physical_resource_id=_text(physical_id),
    )


_TEMPLATE_DIGEST = "template_digest"


def _with_template_digest(data: Mapping[str, Any], resource: ResourceDefinition) -> dict[str, Any]:
    """A provider template resource remembers which text of its template it applied."""
    if resource.provider_digest is None:
        return dict(data)
    return {**data, _TEMPLATE_DIGEST: resource.provider_digest}


def template_changed(row: ResourceRecord, resource: ResourceDefinition) -> bool:
    """The provider template's text differs from the one last applied (Heat updates the
    nested stack then, even when the resource's properties are the same)."""
    if resource.provider_digest is None or row.physical_resource_id is None:
        return False
    return row.plugin_data.get(_TEMPLATE_DIGEST) != resource.provider_digest


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _with(row: ResourceRecord, changes: Mapping[str, Any]) -> ResourceRecord:
    """The row as it will read after ``changes`` (for the report payload)."""
    from dataclasses import replace

    fields = {k: v for k, v in changes.items() if k in row.__dataclass_fields__}
    if "requires" in fields:
        fields["requires"] = frozenset(fields["requires"])
    return replace(row, **fields)


def _jsonable_value(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable_value(v) for v in value]
    return str(value)


def _jsonable(values: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): _jsonable_value(v) for k, v in values.items()}


__all__ = ["ActionFailed", "Outcome", "Worker"]
