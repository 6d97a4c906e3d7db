"""One node of a CHECK traversal: observe a resource and record its drift.

``StackOperations.check`` starts the traversal (one independent node per current
resource, see ``core.check``); the worker holding a node calls ``ResourceChecker.check``
and reports what it found to the stack's sync point, where the last report settles the
stack CHECK_COMPLETE or CHECK_FAILED ("Resource CHECK failed: …", as in Heat). Being a
traversal, a node whose worker died is re-sent by the sweeper, a dead engine's check is
finished by the survivors node by node, and a newer operation supersedes it.

Every resource gets a CHECK event, its drift_status / drift_detail, and the state
CHECK_COMPLETE or CHECK_FAILED (one whose observation failed; the next update replaces
it, as Heat does). A resource owning a nested stack checks that stack too, as Heat does.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from converge.core.check import COMPLETED, CheckReport
from converge.core.drift import Drift, DriftStatus
from converge.core.states import Action, Status
from converge.core.template.environment import is_provider_template
from converge.engine.context import EngineContext
from converge.engine.failure import ActionFailed
from converge.engine.operations import StackOperations
from converge.errors import Conflict, NotFound
from converge.records import NewEvent, ResourceRecord, StackRecord

log = logging.getLogger("converge.engine.check")

# Observes a resource's reality against its stored state; raises ``ActionFailed``.
Observe = Callable[[StackRecord, ResourceRecord], Awaitable[Drift]]


class ResourceChecker:
    def __init__(self, ctx: EngineContext, operations: StackOperations, observe: Observe) -> None:
        self.ctx = ctx
        self.operations = operations
        self.observe = observe

    async def check(self, stack: StackRecord, row: ResourceRecord) -> CheckReport:
        """Observe the resource, record what was found, and say it for the stack's verdict."""
        if row.action == Action.INIT or row.physical_resource_id is None:
            # Heat: "Can not check <name>, resource not created yet." fails the check. The
            # row keeps its state: an update must still create it.
            reason = f"Can not check {row.name}, resource not created yet"
            await self._record(stack, row, None, reason, failed=True)
            return CheckReport(row.name, DriftStatus.NOT_CHECKED, f"{row.name}: {reason}")
        if row.type not in self.ctx.registry:
            reason = f"unknown resource type {row.type!r}"
            await self._record(stack, row, None, reason, failed=True)
            await self._mark(stack, row, Status.FAILED, reason)
            return CheckReport(row.name, DriftStatus.NOT_CHECKED, f"{row.name}: {reason}")
        try:
            drift = await self.observe(stack, row)
        except ActionFailed as failed:
            await self._record(stack, row, None, failed.reason, failed=True)
            await self._mark(stack, row, Status.FAILED, failed.reason)
            return CheckReport(row.name, DriftStatus.NOT_CHECKED, failed.reason)
        await self._record(stack, row, drift, drift.describe())
        await self._mark(stack, row, Status.COMPLETE, f"Drift: {drift.describe()}")
        return CheckReport(row.name, drift.status, nested=await self._check_nested(stack, row))

    async def _check_nested(
        self, stack: StackRecord, row: ResourceRecord
    ) -> tuple[bool, str] | None:
        """Check the nested stack a provider template resource owns; None when it owns none.

        Whether the nested check completed, and its reason. A nested check already in
        progress (started by an earlier delivery of this node) is waited for, not started
        again.
        """
        if not is_provider_template(row.type) or row.physical_resource_id is None:
            return None
        try:
            child = await self.ctx.store.get_stack(row.physical_resource_id)
        except NotFound:
            return None  # gone: the resource's own observation says DELETED
        if child.deleted or child.owner_id != stack.id:
            return None
        if not (child.action == Action.CHECK and child.status == Status.IN_PROGRESS):
            try:
                await self.operations.check(child.id)
            except Conflict as exc:
                return False, str(exc)
        done = await self.operations.wait_settled(child.id)
        text = done.status_reason.removeprefix(f"{COMPLETED} ")
        return done.status == Status.COMPLETE, f"nested {text}"

    async def _mark(
        self, stack: StackRecord, row: ResourceRecord, status: Status, reason: str
    ) -> None:
        """The resource's state becomes CHECK_COMPLETE or CHECK_FAILED, as in Heat.

        Compare-and-swap on the row as read when the node began: if an operation took
        the row since, its state says more than the check's.
        """
        if row.status == Status.IN_PROGRESS:
            return  # an interrupted action: the next update must see it
        await self.ctx.store.update_resource(
            row.id,
            row.atomic_key,
            {"action": Action.CHECK, "status": status, "status_reason": reason},
        )

    async def _record(
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
