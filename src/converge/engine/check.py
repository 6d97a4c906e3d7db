"""The CHECK operation: observe every resource of a stack and record its drift.

A check is a short pass rather than a graph traversal (observing changes nothing, so no
order is needed), but it is recorded like one: the stack goes CHECK_IN_PROGRESS under a
fresh traversal id (so a concurrent update supersedes it) and ends CHECK_COMPLETE or
CHECK_FAILED ("Resource CHECK failed: …", as in Heat); every resource gets a CHECK event,
its drift_status / drift_detail, and the state CHECK_COMPLETE or CHECK_FAILED (one whose
observation failed; the next update replaces it, as Heat does).

The engine running a check holds the stack's ``check:<stack id>`` lease in the database
while it runs. When that engine dies (or stops), the lease is free once its heartbeat is
stale, and the sweeper of the engine the stack hashes to takes the check over: it runs
again from the start (observing twice is harmless), so no stack stays CHECK_IN_PROGRESS.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from collections.abc import Iterable

from converge.core.drift import Drift, DriftStatus
from converge.core.states import Action, Status
from converge.core.template.environment import is_provider_template
from converge.engine.context import EngineContext
from converge.engine.operations import StackOperations, current_rows, stack_event
from converge.engine.worker import ActionFailed, Worker
from converge.errors import Conflict, ConvergeError, NotFound
from converge.records import NewEvent, ResourceRecord, StackRecord

log = logging.getLogger("converge.engine.check")

_CONCURRENT_OBSERVATIONS = 32


class StackChecker:
    def __init__(self, ctx: EngineContext, operations: StackOperations, worker: Worker) -> None:
        self.ctx = ctx
        self.operations = operations
        self.worker = worker
        # Checks of each stack started and not yet ended in this process: the lease is
        # given back when the last one ends.
        self._running: Counter[str] = Counter()

    def is_running(self, stack_id: str) -> bool:
        return self._running[stack_id] > 0

    async def start(self, stack_id: str) -> StackRecord:
        """Mark the stack CHECK_IN_PROGRESS; ``Conflict`` while another operation runs or
        another engine checks it. Call ``run`` with the result."""
        stack = await self.ctx.store.get_stack(stack_id)
        if stack.deleted or stack.action == Action.DELETE:
            raise Conflict(f"stack {stack.name} is {stack.state}: it cannot be checked")
        if stack.status == Status.IN_PROGRESS and stack.action != Action.CHECK:
            # An interrupted CHECK may be started again; anything else must finish first.
            raise Conflict(
                f"stack {stack.name} is {stack.state}: check it when the operation has finished"
            )
        if not await self._take_lease(stack.id):
            raise Conflict(
                f"stack {stack.name} is being checked by another engine: wait for that check"
                " to finish (`converge show` says when)"
            )
        self._running[stack.id] += 1
        try:
            return await self._mark_started(stack)
        except BaseException:
            await self._ended(stack.id)
            raise

    async def take_over(self, stack_id: str) -> StackRecord | None:
        """Start again a check left CHECK_IN_PROGRESS by an engine that is gone; None when
        a live engine still holds it or it has ended meanwhile. Call ``run`` with the
        result."""
        if self.is_running(stack_id) or not await self._take_lease(stack_id):
            return None
        try:
            stack = await self.ctx.store.get_stack(stack_id)
            if stack.action == Action.CHECK and stack.status == Status.IN_PROGRESS:
                log.info("taking over the check of a gone engine", extra={"stack": stack.name})
                return await self.start(stack_id)
        except (Conflict, NotFound) as exc:
            log.info("check not taken over", extra={"stack": stack_id, "error": str(exc)})
        if not self.is_running(stack_id):
            await self._release_lease(stack_id)
        return None

    async def _take_lease(self, stack_id: str) -> bool:
        now = self.ctx.clock.now()
        return await self.ctx.store.take_lease(
            _lease(stack_id),
            self.ctx.engine_id,
            now=now,
            ttl=None,  # a check may take long: held while this engine's heartbeat is fresh
            live_after=now - self.ctx.settings.engine_stale_after,
        )

    async def _ended(self, stack_id: str) -> None:
        self._running[stack_id] -= 1
        if self._running[stack_id] <= 0:
            del self._running[stack_id]
            await self._release_lease(stack_id)

    async def _release_lease(self, stack_id: str) -> None:
        try:
            await self.ctx.store.release_lease(_lease(stack_id), self.ctx.engine_id)
        except ConvergeError as exc:  # left to expire with this engine's heartbeat
            log.warning("check lease not released", extra={"error": str(exc)})

    async def _mark_started(self, stack: StackRecord) -> StackRecord:
        reason = "Stack CHECK started"
        started = await self.ctx.store.update_stack(
            stack.id,
            {
                "action": Action.CHECK,
                "status": Status.IN_PROGRESS,
                "status_reason": reason,
                "current_traversal": uuid.uuid4().hex,
                "current_deps": None,  # no graph: the sweeper leaves a check alone
                "deadline": None,
            },
            expected_key=stack.atomic_key,
            events=[stack_event(stack, Action.CHECK, Status.IN_PROGRESS, reason)],
        )
        if started is None:
            raise Conflict(f"stack {stack.name} changed while the check was starting; try again")
        return started

    async def run(self, stack: StackRecord) -> None:
        """Observe every current resource, record drift, settle the stack; then give the
        lease ``start`` took back."""
        try:
            await self._run(stack)
        finally:
            await self._ended(stack.id)

    async def _run(self, stack: StackRecord) -> None:
        rows = current_rows(await self.ctx.store.list_resources(stack.id), None)
        semaphore = asyncio.Semaphore(_CONCURRENT_OBSERVATIONS)
        results: dict[str, DriftStatus] = {}
        failures: list[str] = []

        async def one(row: ResourceRecord) -> None:
            async with semaphore:
                status, failure = await self._check_resource(stack, row)
            results[row.name] = status
            if failure:
                failures.append(failure)

        async with asyncio.TaskGroup() as group:
            for row in rows.values():
                group.create_task(one(row))
        nested = await self._check_nested(stack, rows.values())
        failures += [f"{name}: {reason}" for name, (ok, reason) in nested.items() if not ok]
        counts = Counter(results.values())
        summary = ", ".join(
            f"{counts[status]} {str(status).lower().replace('_', ' ')}"
            for status in DriftStatus
            if counts[status]
        )
        if failures:
            status = Status.FAILED
            reason = "Resource CHECK failed: " + "; ".join(sorted(failures))
        else:
            status = Status.COMPLETE
            reason = f"Stack CHECK completed successfully ({summary or 'no resources'})"
            if nested:
                reason += "; " + "; ".join(f"{name}: {text}" for name, (_, text) in nested.items())
        done = await self.ctx.store.update_stack(
            stack.id,
            {"status": status, "status_reason": reason, "current_traversal": ""},
            expected_traversal=stack.current_traversal,
            events=[stack_event(stack, Action.CHECK, status, reason)],
        )
        if done is None:
            log.info("check superseded", extra={"stack": stack.name})
        self.operations.signal_settled(stack.id)

    async def _check_nested(
        self, stack: StackRecord, rows: Iterable[ResourceRecord]
    ) -> dict[str, tuple[bool, str]]:
        """Check the nested stacks of provider template resources too, as Heat does.

        By resource name: whether the nested check completed, and its reason.
        """
        results: dict[str, tuple[bool, str]] = {}
        for row in rows:
            if not is_provider_template(row.type) or row.physical_resource_id is None:
                continue
            try:
                child = await self.ctx.store.get_stack(row.physical_resource_id)
            except NotFound:
                continue  # gone: the resource's own observation says DELETED
            if child.deleted or child.owner_id != stack.id:
                continue
            try:
                started = await self.start(child.id)
            except Conflict as exc:
                results[row.name] = (False, str(exc))
                continue
            await self.run(started)
            done = await self.ctx.store.get_stack(child.id)
            text = done.status_reason.removeprefix("Stack CHECK completed successfully ")
            results[row.name] = (done.status == Status.COMPLETE, f"nested {text}")
        return results

    async def _check_resource(
        self, stack: StackRecord, row: ResourceRecord
    ) -> tuple[DriftStatus, str | None]:
        if row.action == Action.INIT or row.physical_resource_id is None:
            # Heat: "Can not check <name>, resource not created yet." fails the check. The
            # row keeps its state: an update must still create it.
            reason = f"Can not check {row.name}, resource not created yet"
            await self.record(stack, row, None, reason, failed=True)
            return DriftStatus.NOT_CHECKED, f"{row.name}: {reason}"
        if row.type not in self.ctx.registry:
            reason = f"unknown resource type {row.type!r}"
            await self.record(stack, row, None, reason, failed=True)
            await self._mark(stack, row, Status.FAILED, reason)
            return DriftStatus.NOT_CHECKED, f"{row.name}: {reason}"
        try:
            drift = (await self.worker.observe_drift(stack, row)).drift
        except ActionFailed as failed:
            await self.record(stack, row, None, failed.reason, failed=True)
            await self._mark(stack, row, Status.FAILED, failed.reason)
            return DriftStatus.NOT_CHECKED, failed.reason
        await self.record(stack, row, drift, drift.describe())
        await self._mark(stack, row, Status.COMPLETE, f"Drift: {drift.describe()}")
        return drift.status, None

    async def _mark(
        self, stack: StackRecord, row: ResourceRecord, status: Status, reason: str
    ) -> None:
        """The resource's state becomes CHECK_COMPLETE or CHECK_FAILED, as in Heat.

        Compare-and-swap on the row as read when the check began: if an operation took
        the row since, its state says more than the check's.
        """
        if row.status == Status.IN_PROGRESS:
            return  # an interrupted action: the next update must see it
        await self.ctx.store.update_resource(
            row.id,
            row.atomic_key,
            {"action": Action.CHECK, "status": status, "status_reason": reason},
        )

    async def record(
        self,
        stack: StackRecord,
        row: ResourceRecord,
        drift: Drift | None,
        reason: str,
        *,
        failed: bool = False,
    ) -> None:
        """Store a resource's drift (None: not checked) with a CHECK event."""
        status = drift.status if drift is not None else DriftStatus.NOT_CHECKED
        detail = {k: dict(v) for k, v in drift.detail.items()} if drift is not None else {}
        await self.ctx.store.set_drift(
            row.id,
            {
                "drift_status": str(status),
                "drift_detail": detail,
                "drift_checked_at": self.ctx.clock.now(),
            },
            events=[
                NewEvent(
                    resource_name=row.name,
                    resource_type=row.type,
                    action=str(Action.CHECK),
                    status=str(Status.FAILED if failed else Status.COMPLETE),
                    reason=f"Drift: {reason}" if not failed else reason,
                    physical_resource_id=row.physical_resource_id,
                )
            ],
            stack_id=stack.id,
        )


def _lease(stack_id: str) -> str:
    return f"check:{stack_id}"
