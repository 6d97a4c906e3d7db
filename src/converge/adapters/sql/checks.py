"""A resource check's two transactions: what a worker reads, and how it finishes.

``load_for_check`` reads the stack, the row and the sync point's reports at once;
``finish_node`` writes the row (or deletes it), the events and the reports to the
successors, and says which successors are now ready, all in one transaction. Both
run inline on a SQLite file and as one statement each on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from converge.adapters.sql.connection import Conn
from converge.adapters.sql.records import event_rows, resource_record, stack_found
from converge.adapters.sql.stacks import StacksMixin
from converge.adapters.sql.sync_points import SyncPointsMixin
from converge.core.traversal import FanInPart, GraphNode
from converge.records import NewEvent, Report, ResourceRecord, StackRecord


class ChecksMixin(StacksMixin, SyncPointsMixin):
    """What a worker's check of one node reads first and writes last."""

    async def load_for_check(
        self, stack_id: str, node: GraphNode, traversal_id: str, *, with_reports: bool = True
    ) -> tuple[StackRecord, ResourceRecord | None, list[Report]]:
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
            return stack_found(stack, stack_id), resource, reports
        return await self._short(self._load_for_check, stack_id, node, traversal_id, with_reports)

    def _load_for_check(
        self, conn: Conn, stack_id: str, node: GraphNode, traversal_id: str, with_reports: bool
    ) -> tuple[StackRecord, ResourceRecord | None, list[Report]]:
        stack = self._stack_by_id(conn, stack_id)
        resource = self._resource_by_id(conn, node.resource_id)
        reports = self._reports(conn, traversal_id, node) if with_reports else []
        return stack, resource, reports

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
    ) -> tuple[bool, list[GraphNode], str]:
        """Store a node's result and report it to its successors in one transaction.

        Returns (stored, successors now ready, the stack's current traversal). ``stored``
        is False when the resource row changed under us (nothing is written then).
        ``kept_if_superseded``: a row to delete is kept with these changes instead when
        the traversal is no longer current (the newer one may have chosen the row).
        ``fan_in``: on PostgreSQL, big fan-ins are counted by group (``sync_part``); on
        SQLite (one writer, no lock to wait on) they keep one counter.
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
            return await self._pg_finish_node(*args)
        return await self._short(self._finish_node, *args)

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
    ) -> tuple[bool, list[GraphNode], str]:
        """``finish_node`` on PostgreSQL: one statement (see ``postgres_hot``)."""
        assert self._pg is not None
        row = None
        if resource_id is not None and expected_key is not None:
            row = (resource_id, expected_key)
        key = expected_key or 0  # the values are written only with a row
        now = self._clock()
        stored, ready, current = await self._pg.finish_node(
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
        )
        return stored, [GraphNode(rid, upd) for rid, upd in ready], current
