"""The update phase of a check: decide what converging a resource takes (nothing, create,
update, replace; drift observed when the traversal asks for it) and act on it, or settle a
resource that needs no change; a newer traversal finding the resource busy preempts it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from converge.core.decide import MISSING, Change, Decision, restriction
from converge.core.drift import Drift, DriftStatus
from converge.core.states import Action, Status, check_resource_transition
from converge.core.template import ALL_ATTRIBUTES, ResourceDefinition
from converge.core.traversal import GraphNode, TraversalGraph
from converge.engine.context import applied_state
from converge.engine.failure import ActionFailed
from converge.engine.inputs import ReportedData
from converge.engine.worker.claim_ahead import AheadClaim, plain_create, reported
from converge.engine.worker.observing import ObservingMixin
from converge.engine.worker.plugin_calls import _Replace
from converge.engine.worker.replacements import ReplacementsMixin
from converge.engine.worker.rows import (
    _IN_SYNC,
    _event,
    _hook_marker,
    _is_cleared,
    _is_left_alone_by_heal,
    _is_paused,
    _jsonable,
    _text,
    _with,
    _with_template_digest,
    converging_decision,
)
from converge.engine.worker.steps import StepsMixin
from converge.errors import TemplateError
from converge.messages import CheckResource
from converge.records import NewEvent, Report, ResourceRecord, StackRecord
from converge.resources.base import AppliedState, Outcome, ResourcePlugin


class UpdatePhaseMixin(StepsMixin, ObservingMixin, ReplacementsMixin):
    """Converging a resource towards the template."""

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
            reason = f"Error: resources.{target.name}: {exc}"
            await self._claim_and_fail(stack, target, action, reason, started="state changed")
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
        decision = converging_decision(
            target,
            resource,
            plugin,
            properties,
            observed=observed,
            drifted=None if drift is None else drift.status == DriftStatus.MODIFIED,
        )
        restricted = restriction(decision, resource.restricted_actions, target.name)
        if restricted is not None:
            await self._claim_and_fail(stack, target, Action.UPDATE, restricted)
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

    async def _plan_ahead(
        self,
        stack: StackRecord,
        graph: TraversalGraph,
        sender: GraphNode,
        node: GraphNode,
        row: ResourceRecord,
        report: Mapping[str, Any],
    ) -> AheadClaim | None:
        """A create of ``node`` decided before ``sender``'s finish, for that finish to
        claim (``claim_ahead.py``): only where this phase could decide nothing else."""
        assert stack.raw_template_id is not None
        definition = await self.ctx.definitions.get(stack.raw_template_id)
        reports = reported(sender, report)
        resource = definition.resources.get(row.name)
        found = plain_create(
            stack, graph, node, row, resource, reports, self.ctx.registry.plugin, self.ctx.host
        )
        if found is None:
            return None
        resource, plugin, properties, data = found
        decision = converging_decision(row, resource, plugin, properties)
        if decision.change != Change.CREATE:
            return None
        if restriction(decision, resource.restricted_actions, row.name) is not None:
            return None
        requires = data.resource_ids()
        intent = {"properties_data": dict(properties), "requires": requires}
        changes, events = self._claim_columns(row, Action.CREATE, "state changed", intent)
        needed = self._needed_attributes(definition.attributes_needed(), resource, plugin)
        acting = self._acting(row.id, stack.current_traversal)  # last: nothing raises after
        if acting is None:
            return None
        return AheadClaim(
            node, row, resource, plugin, properties, requires, needed, changes, events, acting
        )

    async def _act_claimed_ahead(self, message: CheckResource, plan: AheadClaim) -> None:
        """The check of a create claimed ahead by the finish that made it ready: it acts at
        once. Its graph gone (a newer traversal): the claim is given back, the row handed
        on to that traversal."""
        assert plan.inputs is not None and plan.claimed is not None
        stack = plan.inputs.stack
        graph = await self.ctx.graph(message.stack_id, message.traversal_id)
        if graph is None or plan.node not in graph:
            await self._give_back(stack.id, plan)
            return
        await self._act(
            stack,
            graph,
            plan.node,
            plan.row,
            plan.resource,
            plan.plugin,
            Action.CREATE,
            plan.properties,
            plan.requires,
            plan.needed,
            ahead=plan,
        )

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
        ahead: AheadClaim | None = None,
    ) -> None:
        """Claim the row, run create or update, store the result and report it.
        ``ahead``: the row was claimed by the finish that made it ready (its mark and
        claimed row; ``claim_ahead.py``).

        The row is marked as this process's work from before its claim is visible until
        its result is stored: a check of the row in between (a repeated delivery, or a
        newer traversal's) must see this process at work, not a claim left by a crash, or
        it would act on the row again (a second create, the first one's thing leaked)."""
        while True:
            # Before a create, what it is made from is stored as its intent: a create that
            # fails or is interrupted before it records an id can still be found and
            # deleted (the server it was made on, the name it was given), after what it
            # depends on has been deleted in reverse order.
            intent = None
            if action == Action.CREATE and not target.physical_resource_id:
                intent = {"properties_data": dict(properties), "requires": requires}
            claimed: ResourceRecord | None = None
            if ahead is not None:
                acting, claimed, ahead = ahead.acting, ahead.claimed, None
            else:
                marked = self._acting(target.id, stack.current_traversal)
                if marked is None:
                    return
                acting = marked
            try:  # whatever happens, the mark does not outlive this action
                if claimed is None:
                    claimed = await self._claim(
                        stack, target, action, "state changed", intent=intent
                    )
                    if claimed is None:
                        return
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
                        await self._fail_resource(stack, claimed, action, reason, release=acting)
                        return
                    # The plugin cannot update in place: release this row, make a new one.
                    released = await self.ctx.store.update_resource(
                        claimed.id,
                        claimed.atomic_key,
                        {"engine_id": None, "action": target.action, "status": target.status},
                    )
                    self._done(acting)  # released: the mark goes with the claim
                    if released is None:
                        return
                    decision = Decision(Change.REPLACE, str(replace))
                    replacement = await self._make_replacement(stack, released, resource, decision)
                    if replacement is None:
                        return
                    target, action = replacement, Action.CREATE
                    continue
                except ActionFailed as failed:
                    await self._fail_resource(stack, claimed, action, failed.reason, release=acting)
                    return
                done = _Done(action, properties, requires, outcome, attributes, drift_checked)
                changes, events, pause = self._completed(stack, node, claimed, resource, done)
                await self._finish(
                    stack,
                    graph,
                    node,
                    _with(claimed, changes),
                    claimed.atomic_key,
                    changes=changes,
                    events=events,
                    report=not pause,
                    release=acting,
                )
                return
            finally:
                self._done(acting)

    def _completed(
        self,
        stack: StackRecord,
        node: GraphNode,
        claimed: ResourceRecord,
        resource: ResourceDefinition,
        done: _Done,
    ) -> tuple[dict[str, Any], list[NewEvent], bool]:
        """What a completed action stores, its events, and whether it pauses on its
        post-action hook."""
        action, physical_id = done.action, done.outcome.physical_id
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
            "physical_resource_id": _text(physical_id),
            "properties_data": dict(done.properties),
            "plugin_data": _with_template_digest(done.outcome.data, resource),
            "attr_data": _jsonable(done.attributes),
            "current_template_id": stack.raw_template_id,
            "requires": done.requires,
            "replaced_by": None,
            "engine_id": None,
            "type": resource.implementation_type,
            "deletion_policy": resource.deletion_policy,
            "hook_pending": None,
        }
        if done.drift_checked:
            changes.update(_IN_SYNC, drift_checked_at=self.ctx.clock.now())
        events = [_event(claimed, action, Status.COMPLETE, "state changed", physical_id)]
        if pause:
            changes["hook_pending"] = _hook_marker(post_hook, stack.current_traversal, node)
            reason = f"{action} paused until Hook {post_hook} is cleared"
            events.append(_event(claimed, action, Status.COMPLETE, reason, physical_id))
        return changes, events, pause

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


@dataclasses.dataclass(frozen=True)
class _Done:
    """A create or update the plugin completed: what it was given and what it returned."""

    action: Action
    properties: Mapping[str, Any]
    requires: frozenset[int]
    outcome: Outcome
    attributes: Mapping[str, Any]
    drift_checked: bool
