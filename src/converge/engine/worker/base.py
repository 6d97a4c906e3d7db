"""What every part of the worker runs on: the engine's context and operations, the nested
stack service and the resource checker, and the rows this process is acting on now (an
action is marked before its claim is visible, so a repeated check can tell it is at work)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from converge.engine.check import ResourceChecker
from converge.engine.context import EngineContext
from converge.engine.nested import NestedStackService
from converge.engine.operations import StackOperations
from converge.records import ResourceRecord

if TYPE_CHECKING:  # claim_ahead.py uses _Acting, defined here
    from converge.engine.worker.claim_ahead import AheadClaim, AheadRow


class WorkerBase:
    """The worker's shared state; ``Worker`` (``__init__.py``) sets it up, each phase and
    step of a check is a mixin over this."""

    ctx: EngineContext
    operations: StackOperations
    nested: NestedStackService
    checks: ResourceChecker
    # Resource rows this process is acting on now, with the traversal acting on each.
    _active: dict[int, _Acting]
    # Creates claimed ahead by a finish, by row id, until their continued check takes
    # them; the rows of the links after next, by the node whose finish may claim them
    # (``claim_ahead.py``).
    _claimed_ahead: dict[int, AheadClaim]
    _ahead_rows: dict[int, AheadRow]
    claims_ahead: int

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
