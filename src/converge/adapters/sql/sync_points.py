"""Sync points in the SQL store: reports keyed by sender, a counter per target.

A sync point is a set of ``sync_report`` rows keyed by (traversal, target, sender), so a
duplicate report counts once, and a ``sync_point`` counter row per (traversal, target):
readiness is decided by incrementing that row (see ``_report``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Connection

from converge.adapters.sql import tables as t
from converge.adapters.sql.connection import Conn, StoreBase
from converge.core.traversal import FanInPart, GraphNode
from converge.records import Report

# The statements every resource check runs, built once: SQLAlchemy then reuses their
# compiled form without rebuilding and hashing the expression on each call (which cost
# more than the SQL itself).
_rep = t.sync_report.c
_SYNC_POINT = (
    _rep.traversal_id == sa.bindparam("traversal_id"),
    _rep.target_resource_id == sa.bindparam("target_resource_id"),
    _rep.target_is_update == sa.bindparam("target_is_update"),
)
_SELECT_REPORTS = sa.select(_rep.sender_resource_id, _rep.sender_is_update, _rep.data).where(
    *_SYNC_POINT
)
_COUNT_REPORTS = sa.select(sa.func.count()).select_from(t.sync_report).where(*_SYNC_POINT)
_sp = t.sync_point.c
_SELECT_RECEIVED = sa.select(_sp.received).where(
    _sp.traversal_id == sa.bindparam("traversal_id"),
    _sp.target_resource_id == sa.bindparam("target_resource_id"),
    _sp.target_is_update == sa.bindparam("target_is_update"),
)
# One more predecessor heard from: the upsert takes the sync point's row lock, so two
# reporters committing at once are serialized and exactly one sees the last count.
_COUNT_NEW_REPORT = (
    postgresql.insert(t.sync_point)
    .values(
        traversal_id=sa.bindparam("traversal_id"),
        target_resource_id=sa.bindparam("target_resource_id"),
        target_is_update=sa.bindparam("target_is_update"),
        stack_id=sa.bindparam("stack_id"),
        received=1,
    )
    .on_conflict_do_update(
        index_elements=[_sp.traversal_id, _sp.target_resource_id, _sp.target_is_update],
        set_={"received": _sp.received + 1},
    )
    .returning(_sp.received)
)
_part = t.sync_part.c
# One more predecessor of a group heard from (a big fan-in, on PostgreSQL): as above, on
# the group's row.
_COUNT_NEW_PART_REPORT = (
    postgresql.insert(t.sync_part)
    .values(
        traversal_id=sa.bindparam("traversal_id"),
        target_resource_id=sa.bindparam("target_resource_id"),
        target_is_update=sa.bindparam("target_is_update"),
        part=sa.bindparam("part"),
        stack_id=sa.bindparam("stack_id"),
        received=1,
    )
    .on_conflict_do_update(
        index_elements=[
            _part.traversal_id,
            _part.target_resource_id,
            _part.target_is_update,
            _part.part,
        ],
        set_={"received": _part.received + 1},
    )
    .returning(_part.received)
)


class SyncPointsMixin(StoreBase):
    """Sync points: the reports a node's successors wait for, and their counters."""

    @functools.cached_property
    def _insert_report(self) -> Any:
        # RETURNING says whether the report was new (rowcount of an upsert is not reliable).
        return self._insert_ignore(t.sync_report).returning(t.sync_report.c.sender_resource_id)

    def _reports(self, conn: Conn, traversal_id: str, node: GraphNode) -> list[Report]:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            found = self._hot.reports(raw, traversal_id, node.resource_id, node.is_update)
            return [Report(sender, is_update, data) for sender, is_update, data in found]
        assert isinstance(conn, Connection)
        rows = conn.execute(_SELECT_REPORTS, _sync_point(traversal_id, node)).all()
        return [Report(row[0], bool(row[1]), row[2]) for row in rows]

    def _report(
        self,
        conn: Conn,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        fan_in: Mapping[GraphNode, FanInPart],
    ) -> list[GraphNode]:
        """Store the sender's report to each target; the targets that are now ready.

        A target is ready when this report is the one that completed it: its count of
        distinct predecessors, incremented only by a first report, reached the expected
        number. A repeated report (a re-delivered message) does not count again, but
        re-announces a target that is already complete, so a lost trigger is recovered.
        Targets are taken in one order by every sender: two senders reporting to the same
        targets lock their counters in the same order and cannot deadlock.

        A big fan-in's target (in ``fan_in``, on PostgreSQL) counts complete groups: a
        first report increments its group's counter, and the one that completes the group
        increments the target's; the target is ready once it counts every group.
        """
        # Reports and group counters first, then targets' counters, each in target
        # order, as the PostgreSQL statement locks them (``postgres_hot``).
        counted: list[tuple[GraphNode, int]] = []  # (target, count that makes it ready)
        repeated: list[tuple[GraphNode, int]] = []
        ready = []
        for target in sorted(reports):
            row = {
                "traversal_id": traversal_id,
                "target_resource_id": target.resource_id,
                "target_is_update": target.is_update,
                "sender_resource_id": sender.resource_id,
                "sender_is_update": sender.is_update,
                "stack_id": stack_id,
                "data": dict(reports[target]),
            }
            is_new = self._add_report(conn, row)
            expected = expected_counts.get(target, 0)
            # SQLite has one writer: no lock to wait on, one counter is enough.
            part = None if self.is_sqlite else fan_in.get(target)
            if expected <= 1:
                # Waiting for one report, this one: nothing to count, nobody to race.
                ready.append(target)
            elif not is_new:
                repeated.append((target, expected if part is None else part.parts))
            elif part is None:
                counted.append((target, expected))
            elif self._count_new_part_report(conn, stack_id, traversal_id, target, part.part) == (
                part.size
            ):
                counted.append((target, part.parts))  # this report completed its group
        for target, needed in counted:
            if self._count_new_report(conn, stack_id, traversal_id, target) >= needed:
                ready.append(target)
        for target, needed in repeated:
            if self._received(conn, traversal_id, target) >= needed:
                ready.append(target)
        return sorted(ready)

    def _count_new_part_report(
        self, conn: Conn, stack_id: str, traversal_id: str, target: GraphNode, part: int
    ) -> int:
        assert isinstance(conn, Connection)
        params = _sync_point(traversal_id, target)
        params.update(stack_id=stack_id, part=part)
        return int(conn.execute(_COUNT_NEW_PART_REPORT, params).scalar_one())

    def _add_report(self, conn: Conn, row: Mapping[str, Any]) -> bool:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.add_report(raw, row)
        assert isinstance(conn, Connection)
        return conn.execute(self._insert_report, row).first() is not None

    def _count_new_report(
        self, conn: Conn, stack_id: str, traversal_id: str, target: GraphNode
    ) -> int:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.count_new_report(
                raw, stack_id, traversal_id, target.resource_id, target.is_update
            )
        assert isinstance(conn, Connection)
        params = _sync_point(traversal_id, target)
        params["stack_id"] = stack_id
        return int(conn.execute(_COUNT_NEW_REPORT, params).scalar_one())

    def _received(self, conn: Conn, traversal_id: str, target: GraphNode) -> int:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.received(raw, traversal_id, target.resource_id, target.is_update)
        assert isinstance(conn, Connection)
        found = conn.execute(_SELECT_RECEIVED, _sync_point(traversal_id, target))
        return int(found.scalar_one_or_none() or 0)

    def _count_reports(self, conn: Conn, traversal_id: str, target: GraphNode) -> int:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.count_reports(raw, traversal_id, target.resource_id, target.is_update)
        assert isinstance(conn, Connection)
        return int(conn.execute(_COUNT_REPORTS, _sync_point(traversal_id, target)).scalar_one())

    async def count_reports(self, traversal_id: str, target: GraphNode) -> int:
        if self._pg is not None:
            return await self._pg.count_reports(traversal_id, target.resource_id, target.is_update)
        return await self._short(self._count_reports, traversal_id, target)

    async def reported_senders(self, traversal_id: str) -> set[GraphNode]:
        """Every node that has reported in a traversal (the sweeper's view of progress)."""
        return await self._read(self._reported_senders, traversal_id)

    def _reported_senders(self, traversal_id: str) -> set[GraphNode]:
        with self._tx() as conn:
            rows = conn.execute(
                sa.select(t.sync_report.c.sender_resource_id, t.sync_report.c.sender_is_update)
                .where(t.sync_report.c.traversal_id == traversal_id)
                .distinct()
            ).all()
        return {GraphNode(row[0], bool(row[1])) for row in rows}


def _sync_point(traversal_id: str, node: GraphNode) -> dict[str, Any]:
    return {
        "traversal_id": traversal_id,
        "target_resource_id": node.resource_id,
        "target_is_update": node.is_update,
    }
