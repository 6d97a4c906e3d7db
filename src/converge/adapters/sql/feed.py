"""A project's change feed: the events of all its stacks after a given event id, in id order.

The ``event`` table's ids are the feed's sequence: every stack event, resource status change
and drift notification is written there in the transaction that makes the change, so a
reader that resumes after the last id it saw misses nothing and sees nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from converge.adapters.sql import tables as t
from converge.adapters.sql.store import SqlStore
from converge.records import EventRecord


@dataclass(frozen=True)
class FeedEvent:
    event: EventRecord
    stack_name: str


class EventFeed:
    """Reads the feed over the ``SqlStore``'s engine and threads."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    async def since(
        self, project_id: str, after_id: int, *, stack_id: str | None = None, limit: int = 500
    ) -> list[FeedEvent]:
        return await self._store._run(self._since, project_id, after_id, stack_id, limit)

    def _since(
        self, project_id: str, after_id: int, stack_id: str | None, limit: int
    ) -> list[FeedEvent]:
        query = (
            sa.select(t.event, t.stack.c.name.label("stack_name"))
            .join(t.stack, t.stack.c.id == t.event.c.stack_id)
            .where(t.event.c.id > after_id, t.stack.c.project_id == project_id)
            .order_by(t.event.c.id)
            .limit(limit)
        )
        if stack_id is not None:
            query = query.where(t.event.c.stack_id == stack_id)
        with self._store._tx() as conn:
            rows = conn.execute(query).all()
        return [
            FeedEvent(
                EventRecord(
                    id=row.id,
                    stack_id=row.stack_id,
                    resource_name=row.resource_name,
                    physical_resource_id=row.physical_resource_id,
                    resource_type=row.resource_type,
                    action=row.action,
                    status=row.status,
                    reason=row.reason,
                    created_at=row.created_at,
                ),
                row.stack_name,
            )
            for row in rows
        ]

    async def last_id(self) -> int:
        """The newest event id of all (0 when there are none): where a live feed starts."""
        return await self._store._run(self._last_id)

    def _last_id(self) -> int:
        with self._store._tx() as conn:
            value = conn.execute(sa.select(sa.func.max(t.event.c.id))).scalar_one_or_none()
        return int(value or 0)
