"""A resource check's two transactions: what a worker reads, and how it finishes.

``load_for_check`` reads the stack, the row and the sync point's reports at once;
``finish_node`` writes the row (or deletes it), the events and the reports to the
successors, and says which successors are now ready, all in one transaction. Both
run inline on a SQLite file and as one statement each on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from converge.adapters import json_codec
from converge.adapters.sql.connection import Conn
from converge.adapters.sql.records import event_rows, resource_record, stack_found
from converge.adapters.sql.stacks import StacksMixin
from converge.adapters.sql.sync_points import SyncPointsMixin
from converge.core.traversal import FanInPart, GraphNode
from converge.records import CheckInputs, ClaimAhead, FinishedNode, NewEvent, Report


class ChecksMixin(StacksMixin, SyncPointsMixin):
    """What a worker's check of one node reads first and writes last."""

    async def load_for_check(
        self, stack_id: str, node: GraphNode, traversal_id: str, *, with_reports: bool = True
    ) -> CheckInputs:
        """Everything a worker reads before deciding: stack, resource, sync point reports
        (none read when ``with_reports`` is False: a node that waits for nothing)."""
        if self._pg is not None:
            stack, row, found = await self._pg.load_for_check(
                stack_id,
                node.resource_id,
                node.is_update,
                traversal_id,
                with_reports,
            )
            reports = [Report(sender, is_update, data) for sender, is_update, data in found]
            resource = None if row is None else resource_record(row)
            return CheckInputs(stack_found(stack, stack_id), resource, reports)
        return await self._short(self._load_for_check, stack_id, node, traversal_id, with_reports)

    def _load_for_check(
        self, conn: Conn, stack_id: str, node: GraphNode, traversal_id: str, with_reports: bool
    ) -> CheckInputs:
        stack = self._stack_by_id(conn, stack_id)
        resource = self._resource_by_id(conn, node.resource_id)
        reports = self._reports(conn, traversal_id, node) if with_reports else []
        return CheckInputs(stack, resource, reports)

    async def finish_node(
        self,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        *,
        resource_id: int | None,
        expected_key: int | None,
        changes: Mapping[str, Any] | None,
        delete_resource: bool = False,
        events: Sequence[NewEvent] = (),
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        kept_if_superseded: Mapping[str, Any] | None = None,
        fan_in: Mapping[GraphNode, FanInPart] | None = None,
        load_next: GraphNode | None = None,
        claim_next: ClaimAhead | None = None,
        read_ahead: GraphNode | None = None,
    ) -> FinishedNode:
        """Store a node's result and report it to its successors in one transaction.

        Returns (stored, successors now ready, the stack's current traversal, the inputs
        of ``load_next``). ``stored`` is False when the resource row changed under us
        (nothing is written then). ``kept_if_superseded``: a row to delete is kept with
        these changes instead when the traversal is no longer current (the newer one may
        have chosen the row). ``fan_in``: on PostgreSQL, big fan-ins are counted by group
        (``sync_part``); on SQLite (one writer, no lock to wait on) they keep one counter.
        ``load_next`` (see ``Store.finish_node``): read with the finish on PostgreSQL,
        where it saves the check's first round trip; never on SQLite, where a read is an
        inline call. ``claim_next`` and ``read_ahead`` (see ``Store.finish_node``): on
        PostgreSQL only, where a commit is a round trip and a flush of the log.
        """
        args = (
            stack_id,
            traversal_id,
            sender,
            resource_id,
            expected_key,
            changes,
            delete_resource,
            events,
            reports,
            expected_counts,
            kept_if_superseded,
            fan_in or {},
        )
        if self._pg is not None:
            return await self._pg_finish_node(*args, load_next, claim_next, read_ahead)
        stored, ready, current = await self._short(self._finish_node, *args)
        return FinishedNode(stored, ready, current)

    def _finish_node(
        self,
        conn: Conn,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        resource_id: int | None,
        expected_key: int | None,
        changes: Mapping[str, Any] | None,
        delete_resource: bool,
        events: Sequence[NewEvent],
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        kept_if_superseded: Mapping[str, Any] | None,
        fan_in: Mapping[GraphNode, FanInPart],
    ) -> tuple[bool, list[GraphNode], str]:
        if resource_id is not None and expected_key is not None:
            if (
                delete_resource
                and kept_if_superseded is not None
                and self._current_traversal(conn, stack_id) != traversal_id
            ):
                if not self._cas_resource(conn, resource_id, expected_key, kept_if_superseded):
                    conn.rollback()
                    return False, [], ""
            elif delete_resource:
                if not self._delete_resource(conn, resource_id, expected_key):
                    conn.rollback()
                    return False, [], ""
            elif changes is not None and not self._cas_resource(
                conn, resource_id, expected_key, changes
            ):
                conn.rollback()
                return False, [], ""
        self._add_events(conn, stack_id, events)
        ready = self._report(conn, stack_id, traversal_id, sender, reports, expected_counts, fan_in)
        current = self._current_traversal(conn, stack_id)
        return True, ready, current or ""

    async def _pg_finish_node(
        self,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        resource_id: int | None,
        expected_key: int | None,
        changes: Mapping[str, Any] | None,
        delete_resource: bool,
        events: Sequence[NewEvent],
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        kept_if_superseded: Mapping[str, Any] | None,
        fan_in: Mapping[GraphNode, FanInPart],
        load_next: GraphNode | None,
        claim_next: ClaimAhead | None,
        read_ahead: GraphNode | None,
    ) -> FinishedNode:
        """``finish_node`` on PostgreSQL: one statement (see ``postgres_hot``)."""
        assert self._pg is not None
        row = None
        if resource_id is not None and expected_key is not None:
            row = (resource_id, expected_key)
        key = expected_key or 0  # the values are written only with a row
        now = self._clock()
        # The statement reads in the snapshot it began with, without its own writes: a
        # successor row that this finish writes (or deletes) would come back as it was.
        # A successor with several predecessors is never read here: see ``_next_check``.
        if load_next is not None and (
            load_next not in reports
            or expected_counts.get(load_next) != 1
            or load_next.resource_id in (resource_id, sender.resource_id)
        ):
            load_next = None
        if (
            load_next is None
            or claim_next is None
            or claim_next.resource_id != (load_next.resource_id)
        ):
            claim_next = None
        if load_next is None:
            read_ahead = None  # read by the continued check's finish: none without one
        claim = None
        if claim_next is not None:
            claim = (
                claim_next.resource_id,
                claim_next.expected_key,
                self._cas_values(claim_next.expected_key, claim_next.changes),
                event_rows(stack_id, claim_next.events, now),
            )
        stored, ready, current, loaded, claimed, ahead = await self._pg.finish_node(
            stack_id=stack_id,
            traversal_id=traversal_id,
            sender=(sender.resource_id, sender.is_update),
            resource=row,
            values=None if changes is None else self._cas_values(key, changes),
            delete=delete_resource,
            kept=(
                None if kept_if_superseded is None else self._cas_values(key, kept_if_superseded)
            ),
            events=event_rows(stack_id, events, now),
            targets=[
                (
                    target.resource_id,
                    target.is_update,
                    dict(reports[target]),
                    expected_counts.get(target, 0),
                    fan_in.get(target),
                )
                for target in sorted(reports)
            ],
            now=now,
            load_next=None if load_next is None else (load_next.resource_id, load_next.is_update),
            claim_next=claim,
            read_ahead=None if read_ahead is None else read_ahead.resource_id,
        )
        ready_nodes = [GraphNode(rid, upd) for rid, upd in ready]
        ahead_row = None if ahead is None else resource_record(ahead)
        if load_next is None or loaded is None:
            return FinishedNode(stored, ready_nodes, current, ahead=ahead_row)
        stack, resource = loaded
        next_check = _next_check(stack_id, stack, resource, sender, reports[load_next])
        claimed_row = None if claimed is None else resource_record(claimed)
        return FinishedNode(stored, ready_nodes, current, next_check, claimed_row, ahead_row)


def _next_check(
    stack_id: str, stack: Any, resource: Any, sender: GraphNode, report: Mapping[str, Any]
) -> CheckInputs:
    """The inputs of a successor read with its one predecessor's finish. Its reports are
    that finish's own report, built here: the statement's snapshot cannot see the report
    the statement itself inserts. Only a successor with one predecessor qualifies. With
    several, the others' reports would come from the snapshot, and under READ COMMITTED
    that snapshot is taken when the statement starts: a report another predecessor
    committed while this statement waited on the counter's row lock (the very report
    that may make the target ready here) would be missing, and the check would resolve
    its properties from incomplete inputs. ``load_for_check``, run after the commit,
    sees them all. The report goes through JSON as the stored one comes back."""
    data = json_codec.loads(json_codec.dumps(report))
    return CheckInputs(
        stack_found(stack, stack_id),
        None if resource is None else resource_record(resource),
        [Report(sender.resource_id, sender.is_update, data)],
    )
