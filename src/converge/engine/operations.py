"""Stack operations: every create, update, delete, rollback and cancel starts a traversal.

Starting one stores the target template, makes rows for new resources, builds the graph,
points the stack at a new traversal id (compare-and-swap, so a concurrent operation simply
supersedes the older one: no lock, no "stack is busy") and sends the leaves. Completion
and failure of a traversal are also decided here.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from converge.core.check import CheckReport, check_graph, verdict
from converge.core.states import Action, Status
from converge.core.template import StackDefinition
from converge.core.template.environment import without_parameter_values
from converge.core.traversal import (
    STACK_NODE,
    ExistingResource,
    GraphNode,
    TraversalGraph,
    build_traversal_graph,
    choose_rows,
    update_phase_done,
)
from converge.engine.context import EMPTY_TEMPLATE, EngineContext
from converge.engine.inputs import StoredData
from converge.errors import Conflict, ConvergeError, StoreError, TemplateError
from converge.ports import Subscriber
from converge.records import NewEvent, NewResource, ResourceRecord, StackRecord

log = logging.getLogger("converge.engine.operations")

STACK_TYPE = "OS::Heat::Stack"
# Published when a stack's operation settles: observers re-read what they watch at once
# instead of at their next pass (a replaced process must be watched from its first second).
SETTLED_TOPIC = "stack.settled"
_MAX_START_ATTEMPTS = 50
_COMPLETED_KEPT = 1000
_CHECK_STARTED = "Stack CHECK started"


class _RowsChanged(Exception):
    """A resource row vanished while a traversal was being started: read again."""


class _Automatic:
    """Marks "choose the previous template by the usual rule"."""


AUTOMATIC = _Automatic()


def stack_event(stack: StackRecord, action: Action, status: Status, reason: str) -> NewEvent:
    return NewEvent(
        resource_name=stack.name,
        resource_type=STACK_TYPE,
        action=str(action),
        status=str(status),
        reason=reason,
        physical_resource_id=stack.id,
    )


class StackOperations:
    def __init__(self, ctx: EngineContext) -> None:
        self.ctx = ctx
        self._timers: set[asyncio.Task[None]] = set()
        self._settled: dict[str, asyncio.Event] = {}
        # Traversals completed in this process, by id: a caller waiting for its operation
        # learns it completed even when a newer one starts before it reads the stack.
        self._completed: dict[str, StackRecord] = {}
        # Hears other processes' ``stack.settled`` notices (``_follow_settled``).
        self._follower: asyncio.Task[None] | None = None

    # --- starting traversals -----------------------------------------------------------

    async def converge(
        self,
        stack_id: str,
        template_id: int,
        definition: StackDefinition,
        action: Action,
        *,
        reason: str | None = None,
        previous_template_id: int | _Automatic | None = AUTOMATIC,
        converge: bool = False,
        converge_names: Sequence[str] | None = None,
        events: Sequence[NewEvent] = (),
        traversal_id: str | None = None,
        supersedes_delete: bool = False,
        settings: Mapping[str, Any] | None = None,
        ending: str | None = None,
        ending_events: Sequence[NewEvent] = (),
    ) -> StackRecord:
        """Start a traversal converging the stack to ``template_id``; supersedes any other,
        but a delete only when ``supersedes_delete`` (a nested stack, whose owner decides).

        ``converge``: workers compare with observed reality (Heat's ``converge: true``);
        ``converge_names`` limits that to these resources (a heal). Both are stored on the
        stack, so a worker in any process knows the traversal's mode. ``traversal_id``: the
        new traversal's id when the caller derives it (a nested stack's, from its owner's
        traversal); when the stack already has that traversal, nothing is started again.

        Whether a delete runs is decided on the stack as read for the start, which is a
        compare-and-swap on it: a delete that began after the caller's own check (an update
        checks first) is seen here, and a deleted stack is never converged again (its
        resources would be made for a stack nobody can see).

        ``settings``: stack columns the operation changes (an update's ``timeout_mins``,
        ``disable_rollback``, ``drift_policy``), written with the start, so an operation
        refused here changes nothing.

        ``ending``: start only while this traversal is the stack's current one and in
        progress (the stack is returned as read, nothing started, otherwise); its
        ``ending_events`` (its failure) are stored with the start, before the new one's.
        A failed operation's rollback starts this way: had the failure been stored first,
        a process killed in between would leave the stack FAILED, half updated, with no
        rollback to come. ``ending=""``: the stack's first traversal (a create's), which
        the sweeper may start too when its client died after storing the stack.
        """
        settings = dict(settings or {})
        requirements = {name: sorted(res.requires) for name, res in definition.resources.items()}
        for _attempt in range(_MAX_START_ATTEMPTS):
            stack = await self.ctx.store.get_stack(stack_id)
            if traversal_id is not None and stack.current_traversal == traversal_id:
                return stack  # started by a concurrent repeat of the same request
            if ending is not None and (
                stack.current_traversal != ending or stack.status != Status.IN_PROGRESS
            ):
                return stack  # ended already (superseded, or ended by another process)
            if stack.deleted:
                if action == Action.DELETE:
                    return stack  # nothing is left to delete
                raise Conflict(f"stack {stack.name} was deleted: its {action} cannot start")
            if stack.action == Action.DELETE and action != Action.DELETE and not supersedes_delete:
                raise Conflict(f"stack {stack.name} is {stack.state}: its {action} cannot start")
            # The graph of a traversal this one supersedes: did its update phase finish?
            # (A CHECK's graph converges nothing: the stack stays at its template.)
            running = (
                await self.ctx.graph(stack_id, stack.current_traversal)
                if stack.status == Status.IN_PROGRESS
                and stack.current_traversal
                and stack.action != Action.CHECK
                else None
            )
            rows = await self.ctx.store.list_resources(stack_id)
            named = {row.name for row in rows}
            new_rows = [
                NewResource(
                    name=name,
                    type=res.implementation_type,
                    deletion_policy=res.deletion_policy,
                    host=self.ctx.host_for(res.implementation_type),
                )
                for name, res in definition.resources.items()
                if name not in named
            ]
            new_traversal = traversal_id or uuid.uuid4().hex
            timeout_mins = settings.get("timeout_mins", stack.timeout_mins)
            deadline = self.ctx.clock.now() + timeout_mins * 60 if timeout_mins else None
            text = reason or f"Stack {action} started"
            built: list[TraversalGraph] = []

            def build(
                all_rows: list[ResourceRecord],
                _stack: StackRecord = stack,
                _running: TraversalGraph | None = running,
                _traversal: str = new_traversal,
                _deadline: float | None = deadline,
                _text: str = text,
                _built: list[TraversalGraph] = built,
            ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
                existing = [_existing(row) for row in all_rows]
                _previous = (
                    _previous_template(_stack, _running, existing, template_id)
                    if isinstance(previous_template_id, _Automatic)
                    else previous_template_id
                )
                chosen = choose_rows(requirements, existing, template_id, _previous)
                ids: dict[str, int] = {}
                for name, row in chosen.items():
                    if row is None:
                        raise _RowsChanged(name)
                    ids[name] = row.id
                graph = build_traversal_graph(requirements, ids, existing)
                graph.pin_hosts({row.id: row.host for row in all_rows if row.host is not None})
                _built.append(graph)
                changes = {
                    **settings,
                    "action": action,
                    "status": Status.IN_PROGRESS,
                    "status_reason": _text,
                    "raw_template_id": template_id,
                    "prev_raw_template_id": _previous,
                    "current_traversal": _traversal,
                    "deadline": _deadline,
                    "outputs": {},
                    "converge": converge or converge_names is not None,
                    "converge_names": None if converge_names is None else sorted(converge_names),
                }
                return changes, graph.encode()

            try:
                started = await self.ctx.store.start_traversal(
                    stack_id,
                    stack.atomic_key,
                    new_rows,
                    build,
                    events=[
                        *ending_events,
                        stack_event(stack, action, Status.IN_PROGRESS, text),
                        *events,
                    ],
                )
            except _RowsChanged:
                continue
            if started is None:
                continue  # another operation changed the stack first: read it again
            graph = built[-1]
            self.ctx.graphs.put((stack_id, new_traversal), graph)
            self._settled.setdefault(stack_id, asyncio.Event()).clear()
            log.info(
                "traversal started",
                extra={"stack": started.name, "action": str(action), "nodes": len(graph)},
            )
            if deadline is not None:
                self._watch_deadline(stack_id, new_traversal, deadline)
            await self._send_leaves(stack_id, new_traversal, graph)
            return started
        raise Conflict(
            f"stack {stack_id}: could not start the {action} (too many concurrent changes)"
        )

    async def check(self, stack_id: str) -> StackRecord:
        """Start a CHECK traversal: observe every current resource (``engine.check``);
        supersedes a CHECK in progress, ``Conflict`` while another operation runs."""
        for _attempt in range(_MAX_START_ATTEMPTS):
            stack = await self.ctx.store.get_stack(stack_id)
            if stack.deleted or stack.action == Action.DELETE:
                raise Conflict(f"stack {stack.name} is {stack.state}: it cannot be checked")
            if stack.status == Status.IN_PROGRESS and stack.action != Action.CHECK:
                raise Conflict(
                    f"stack {stack.name} is {stack.state}: check it when the operation has finished"
                )
            traversal_id = uuid.uuid4().hex
            built: list[TraversalGraph] = []

            def build(
                all_rows: list[ResourceRecord],
                _traversal: str = traversal_id,
                _built: list[TraversalGraph] = built,
            ) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
                rows = current_rows(all_rows, None).values()
                graph = check_graph(row.id for row in rows)
                graph.pin_hosts({row.id: row.host for row in rows if row.host is not None})
                _built.append(graph)
                changes = {
                    "action": Action.CHECK,
                    "status": Status.IN_PROGRESS,
                    "status_reason": _CHECK_STARTED,
                    "current_traversal": _traversal,
                    "deadline": None,
                }
                return changes, graph.encode()

            started = await self.ctx.store.start_traversal(
                stack_id,
                stack.atomic_key,
                [],
                build,
                events=[stack_event(stack, Action.CHECK, Status.IN_PROGRESS, _CHECK_STARTED)],
            )
            if started is None:
                continue  # another operation changed the stack first: read it again
            graph = built[-1]
            self.ctx.graphs.put((stack_id, traversal_id), graph)
            self._settled.setdefault(stack_id, asyncio.Event()).clear()
            log.info("check started", extra={"stack": started.name, "nodes": len(graph)})
            await self._send_leaves(stack_id, traversal_id, graph)
            return started
        raise Conflict(f"stack {stack_id}: could not start the CHECK (too many concurrent changes)")

    async def _send_leaves(self, stack_id: str, traversal_id: str, graph: TraversalGraph) -> None:
        leaves = graph.leaves()
        if not leaves:
            await self.complete_traversal(stack_id, traversal_id)
        await self.ctx.send_checks(stack_id, traversal_id, leaves)

    async def delete(self, stack: StackRecord) -> None:
        """Start deleting the stack (nothing to do when a delete already runs)."""
        if stack.action == Action.DELETE and stack.status == Status.IN_PROGRESS:
            return
        environment: Mapping[str, Any] = {}
        if stack.raw_template_id is not None:
            stored = (await self.ctx.store.get_template(stack.raw_template_id)).environment
            environment = without_parameter_values(stored)
        template_id = await self.ctx.store.add_template(
            stack.id, EMPTY_TEMPLATE, environment, {}, {}
        )
        definition = await self.ctx.definitions.get(template_id)
        await self.converge(stack.id, template_id, definition, Action.DELETE)

    async def store_empty_template(self, stack_id: str) -> int:
        return await self.ctx.store.add_template(stack_id, EMPTY_TEMPLATE, {}, {}, {})

    async def rollback(
        self,
        stack: StackRecord,
        reason: str = "Stack ROLLBACK started",
        *,
        failure: NewEvent | None = None,
    ) -> bool:
        """Converge back to the last complete template (or to nothing after a failed create).

        ``failure``: the stack's traversal failed with this event, stored with the
        rollback's start, which happens only while that traversal is still the current
        one (``converge``'s ``ending``). Whether the rollback started.
        """
        target = stack.prev_raw_template_id
        if target is None or stack.action == Action.CREATE:
            target = await self.store_empty_template(stack.id)
        definition = await self.ctx.definitions.get(target)
        new_traversal = uuid.uuid4().hex
        started = await self.converge(
            stack.id,
            target,
            definition,
            Action.ROLLBACK,
            reason=reason,
            previous_template_id=stack.raw_template_id,
            traversal_id=new_traversal,
            ending=None if failure is None else stack.current_traversal,
            ending_events=() if failure is None else (failure,),
        )
        return started.current_traversal == new_traversal

    async def cancel_update(self, stack: StackRecord, *, rollback: bool) -> None:
        """Heat's cancel: with rollback, converge back (to nothing for a create); without,
        stop the traversal here and in every nested stack below, and fail the stack."""
        if stack.status != Status.IN_PROGRESS or stack.action not in (Action.UPDATE, Action.CREATE):
            raise Conflict(
                f"stack {stack.name} is {stack.state}: only a CREATE_IN_PROGRESS or "
                "UPDATE_IN_PROGRESS can be cancelled"
            )
        if rollback:
            await self.rollback(stack, f"Stack {stack.action} cancelled, rolling back")
            return
        await self._stop_traversal(stack)
        for child in await self.descendants(stack):
            if child.status == Status.IN_PROGRESS:
                await self._stop_traversal(child)

    async def _stop_traversal(self, stack: StackRecord) -> None:
        """Fail the stack's operation; work in progress finishes but propagates no further."""
        reason = f"Stack {stack.action} cancelled"
        await self.ctx.store.update_stack(
            stack.id,
            {
                "status": Status.FAILED,
                "status_reason": reason,
                "current_traversal": "",
                "deadline": None,
            },
            expected_traversal=stack.current_traversal,
            events=[stack_event(stack, stack.action, Status.FAILED, reason)],
        )
        self._signal(stack.id)

    async def descendants(self, stack: StackRecord) -> list[StackRecord]:
        """Every live nested stack below ``stack``, parents before children."""
        stacks = await self.ctx.store.list_stacks(stack.project_id)
        children: dict[str, list[StackRecord]] = {}
        for candidate in stacks:
            if candidate.owner_id is not None:
                children.setdefault(candidate.owner_id, []).append(candidate)
        found: list[StackRecord] = []
        pending = [stack.id]
        while pending:
            for child in children.get(pending.pop(0), []):
                found.append(child)
                pending.append(child.id)
        return found

    # --- ending traversals -------------------------------------------------------------

    async def complete_traversal(self, stack_id: str, traversal_id: str) -> bool:
        """Complete the traversal (outputs, purge); whether this call did (not another
        process, not a newer traversal)."""
        stack = await self.ctx.store.get_stack(stack_id)
        if stack.current_traversal != traversal_id or stack.status != Status.IN_PROGRESS:
            return False
        graph = await self.ctx.graph(stack_id, traversal_id)
        changes: dict[str, Any] = {"deadline": None, "current_deps": None}
        status, reason = Status.COMPLETE, f"Stack {stack.action} completed successfully"
        if stack.action == Action.CHECK:
            # The verdict is in what every node reported to the stack; outputs stay.
            _, _, found = await self.ctx.store.load_for_check(stack_id, STACK_NODE, traversal_id)
            status, reason = verdict(CheckReport.from_payload(report.data) for report in found)
        elif stack.action != Action.DELETE and stack.raw_template_id is not None:
            definition = await self.ctx.definitions.get(stack.raw_template_id)
            if not definition.outputs and stack.converge_names is None:
                # Nothing to resolve nor to report: the rows (1,000s, read on the way to
                # the client's answer) are not needed.
                rows = {}
            else:
                rows = current_rows(await self.ctx.store.list_resources(stack_id), graph)
            changes["outputs"] = resolve_outputs(definition, rows, self.ctx.reference_id)
            # A heal leaves a resource it gave up on FAILED: the stack keeps saying so.
            given_up = [row for row in rows.values() if row.status == Status.FAILED]
            if stack.converge_names is not None and given_up:
                status, reason = Status.FAILED, given_up_reason(given_up)
        else:
            changes["outputs"] = {}
        if stack.action == Action.DELETE:
            # Gone by name in the same commit that says DELETE_COMPLETE: a client that saw
            # it may at once create a stack of that name (mark_stack_deleted, below,
            # clears what the stack left behind).
            changes["deleted_marker"] = stack_id
        done = await self.ctx.store.update_stack(
            stack_id,
            {"status": status, "status_reason": reason, **changes},
            expected_traversal=traversal_id,
            # the sweeper and the last worker may both get here: only one completes
            expected_key=stack.atomic_key,
            events=[stack_event(stack, stack.action, status, reason)],
        )
        if done is None:
            return False
        self._completed[traversal_id] = done
        while len(self._completed) > _COMPLETED_KEPT:
            del self._completed[next(iter(self._completed))]
        self.ctx.graphs.forget((stack_id, traversal_id))
        keep = [i for i in (done.raw_template_id, done.prev_raw_template_id) if i is not None]
        await self.ctx.store.purge_stack_data(stack_id, keep)
        if done.action == Action.DELETE:
            await self.ctx.store.mark_stack_deleted(stack_id)
        log.info("traversal complete", extra={"stack": done.name, "state": done.state})
        self._signal(stack_id)
        if done.action != Action.CHECK:  # a check made nothing new to watch
            await self._announce_settled(stack_id)
        return True

    async def fail_traversal(self, stack_id: str, traversal_id: str, reason: str) -> None:
        """Fail the stack's operation (if the traversal is still current): roll back if
        enabled, in the same commit that stores the failure; else mark the stack FAILED."""
        stack = await self.ctx.store.get_stack(stack_id)
        if stack.current_traversal != traversal_id or stack.status != Status.IN_PROGRESS:
            return
        failure = stack_event(stack, stack.action, Status.FAILED, reason)
        # A heal converges the current template again: rolling back would go elsewhere.
        is_heal = stack.converge_names is not None
        if (
            not stack.disable_rollback
            and not is_heal
            and stack.action in (Action.CREATE, Action.UPDATE)
        ):
            try:
                if await self.rollback(stack, failure=failure):
                    self.ctx.graphs.forget((stack_id, traversal_id))
                    log.info("traversal failed", extra={"stack": stack.name, "reason": reason})
                    return
            except StoreError:
                # Nothing was stored: the traversal still runs, and the failed check (tried
                # again) or the deadline's sweep fails it again, rollback included.
                raise
            except ConvergeError as exc:
                log.error(
                    "rollback could not start", extra={"stack": stack.name, "error": str(exc)}
                )
        failed = await self.ctx.store.update_stack(
            stack_id,
            {
                "status": Status.FAILED,
                "status_reason": reason,
                "current_traversal": "",
                "deadline": None,
            },
            expected_traversal=traversal_id,
            events=[failure],
        )
        if failed is None:
            return
        self.ctx.graphs.forget((stack_id, traversal_id))
        log.info("traversal failed", extra={"stack": failed.name, "reason": reason})
        self._signal(stack_id)

    async def _announce_settled(self, stack_id: str) -> None:
        """Tell observers which types may have new real things to watch (a hint)."""
        types = await self.ctx.store.resource_types(stack_id)
        await self.ctx.bus.publish(SETTLED_TOPIC, {"stack_id": stack_id, "types": sorted(types)})

    # --- waiting -----------------------------------------------------------------------

    def _signal(self, stack_id: str) -> None:
        self._settled.setdefault(stack_id, asyncio.Event()).set()

    async def wait_settled(self, stack_id: str, poll: float = 0.25) -> StackRecord:
        """Wait until the stack is no longer IN_PROGRESS (events here and from the bus,
        polling for what they miss)."""
        await self._follow_settled()
        while True:
            # Cleared before the read: a signal that comes during it is not lost.
            event = self._settled.setdefault(stack_id, asyncio.Event())
            event.clear()
            stack = await self.ctx.store.get_stack(stack_id)
            if stack.status != Status.IN_PROGRESS:
                return stack
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), poll)

    async def wait_operation(
        self, stack_id: str, traversal_id: str, template_id: int, poll: float = 0.25
    ) -> StackRecord:
        """Wait until the operation that started ``traversal_id`` (converging to
        ``template_id``) settles, its own rollback included, or a newer one supersedes it.
        """
        await self._follow_settled()
        while True:
            event = self._settled.setdefault(stack_id, asyncio.Event())
            event.clear()
            completed = self._completed.get(traversal_id)
            if completed is not None:
                return completed
            stack = await self.ctx.store.get_stack(stack_id)
            if stack.status != Status.IN_PROGRESS or is_superseded(stack, template_id):
                return stack
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), poll)

    async def _follow_settled(self) -> None:
        """Where other processes complete traversals (a broker between them), hear of it
        from their ``stack.settled`` notices rather than at the next poll (an eighth of a
        second late on average): subscribed once, at this process's first wait. The
        notices are hints; the poll still catches what they miss (a failure, a notice
        published before the subscription was in place)."""
        if self._follower is not None or not self.ctx.bus.reaches_other_hosts:
            return
        try:
            subscription = await self.ctx.bus.subscribe(SETTLED_TOPIC)
        except Exception as exc:  # only a hint, whatever failed: the poll remains
            log.info("waiting by polling only", extra={"error": str(exc)})
            return
        if self._follower is not None:  # another wait subscribed meanwhile
            await subscription.close()
            return
        self._follower = asyncio.get_running_loop().create_task(
            self._hear_settled(subscription), name="converge-settled-notices"
        )

    async def _hear_settled(self, subscription: Subscriber) -> None:
        try:
            async for notice in subscription:
                stack_id = notice.get("stack_id")
                event = self._settled.get(stack_id) if isinstance(stack_id, str) else None
                if event is not None:
                    event.set()
        finally:
            await subscription.close()

    # --- deadlines ---------------------------------------------------------------------

    def _watch_deadline(self, stack_id: str, traversal_id: str, deadline: float) -> None:
        task = asyncio.get_running_loop().create_task(
            self._expire_at(stack_id, traversal_id, deadline), name=f"deadline-{stack_id}"
        )
        self._timers.add(task)
        task.add_done_callback(self._timers.discard)

    async def _expire_at(self, stack_id: str, traversal_id: str, deadline: float) -> None:
        await self.ctx.clock.sleep(deadline - self.ctx.clock.now())
        try:
            await self.expire_if_due(stack_id, traversal_id, deadline)
        except StoreError as exc:  # the sweeper expires overdue traversals at every sweep
            log.warning(
                "timeout not stored now; the sweeper will",
                extra={"stack": stack_id, "error": str(exc)},
            )

    async def expire_if_due(self, stack_id: str, traversal_id: str, deadline: float | None) -> None:
        if deadline is not None and self.ctx.clock.now() >= deadline:
            await self.fail_traversal(stack_id, traversal_id, "Timed out")

    async def close(self) -> None:
        tasks = [*self._timers, *([self._follower] if self._follower is not None else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _previous_template(
    stack: StackRecord,
    running: TraversalGraph | None,
    existing: Sequence[ExistingResource],
    template_id: int,
) -> int | None:
    """The template a new operation builds on: what reality was last converged to.

    That is the stack's template when its operation completed or a CHECK runs, or when
    the traversal being superseded has finished its update phase (only cleanup is left);
    otherwise the template that traversal itself built on.
    """
    current = stack.raw_template_id
    if current is None or current == template_id:
        return stack.prev_raw_template_id
    if stack.status == Status.COMPLETE:
        return current
    if stack.status == Status.IN_PROGRESS and stack.action == Action.CHECK:
        return current  # a check converges nothing: as when it has completed
    if (
        stack.status == Status.IN_PROGRESS
        and running is not None
        and update_phase_done(running, existing, current)
    ):
        return current
    return stack.prev_raw_template_id


def _existing(row: ResourceRecord) -> ExistingResource:
    return ExistingResource(
        id=row.id,
        name=row.name,
        requires=row.requires,
        replaces=row.replaces,
        current_template_id=row.current_template_id,
        untouched=row.action == Action.INIT and row.replaced_by is None,
        replaced_by=row.replaced_by,
        failed=row.status == Status.FAILED,
        deleting=row.action == Action.DELETE,
        settled=row.status == Status.COMPLETE
        and row.action != Action.INIT
        and not row.hook_pending
        and row.engine_id is None,
    )


def is_superseded(stack: StackRecord, template_id: int) -> bool:
    """Has a newer operation replaced the one that converges the stack to ``template_id``?

    Every operation stores a template of its own; the rollback of a failed operation
    records that operation's template as the one it rolls back from, so it is no newer
    operation. Purely computational, no side-effects.
    """
    if stack.raw_template_id == template_id:
        return False
    return not (stack.action == Action.ROLLBACK and stack.prev_raw_template_id == template_id)


def current_rows(
    rows: Sequence[ResourceRecord], graph: TraversalGraph | None
) -> dict[str, ResourceRecord]:
    """The row that stands for each resource name now: replacements win over originals."""
    by_id = {row.id: row for row in rows}
    chosen: dict[str, ResourceRecord] = {}
    for row in rows:
        if graph is not None and GraphNode(row.id, True) not in graph:
            continue
        final = row
        seen = {row.id}
        while final.replaced_by is not None and final.replaced_by in by_id:
            final = by_id[final.replaced_by]
            if final.id in seen:
                break
            seen.add(final.id)
        chosen[row.name] = final
    if graph is not None:
        # A replacement made during the traversal whose original is already deleted.
        for row in rows:
            if row.name not in chosen and row.replaced_by is None and row.replaces is not None:
                chosen[row.name] = row
    if graph is None:
        # No graph (settled stack): the newest live row of each name.
        for row in rows:
            if row.replaced_by is None or row.replaced_by not in by_id:
                chosen[row.name] = row
    return chosen


def given_up_reason(rows: Sequence[ResourceRecord]) -> str:
    """The stack's reason while healing has given up on some of its resources."""
    names = ", ".join(sorted(row.name for row in rows))
    first = min(rows, key=lambda row: row.name)
    return (
        f"Drift of {names} not healed: {first.name}: {first.status_reason}; "
        "`converge apply` (or an update) converges it again"
    )


def resolve_outputs(
    definition: StackDefinition,
    rows: Mapping[str, ResourceRecord],
    reference_id: Callable[[ResourceRecord], Any],
) -> dict[str, Any]:
    """Every output's value, or its error: an unresolvable output does not fail the stack."""
    data = StoredData(
        {name: reference_id(row) for name, row in rows.items()},
        {name: row.attr_data for name, row in rows.items()},
    )
    outputs: dict[str, Any] = {}
    for name, output in definition.outputs.items():
        entry: dict[str, Any] = {"output_key": name, "description": output.description}
        try:
            entry["output_value"] = output.resolve(data)
        except (TemplateError, KeyError, TypeError, ValueError, IndexError) as exc:
            entry["output_value"] = None
            entry["output_error"] = str(exc)
        outputs[name] = entry
    return outputs


__all__ = [
    "STACK_NODE",
    "StackOperations",
    "current_rows",
    "given_up_reason",
    "is_superseded",
    "resolve_outputs",
    "stack_event",
]
