"""Events in the SQL store: added with the writes they describe, listed in order."""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from converge.adapters.sql import tables as t
from converge.adapters.sql.connection import Conn, StoreBase
from converge.adapters.sql.records import event_record, event_rows
from converge.records import EventRecord, NewEvent

_INSERT_EVENT = t.event.insert()


class EventsMixin(StoreBase):
    """Events: what happened to a stack and its resources, in order."""

    async def add_events(self, stack_id: str, events: Sequence[NewEvent]) -> None:
        if events and self._pg is not None:
            now = self._clock()
            await self._pg.add_events(stack_id, event_rows(stack_id, events, now), now)
        elif events:
            await self._short(self._add_events, stack_id, events)

    def _add_events(self, conn: Conn, stack_id: str, events: Sequence[NewEvent]) -> None:
        if not events:
            return
        rows = event_rows(stack_id, events, self._clock())
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            self._hot.add_events(raw, rows)
        else:
            assert isinstance(conn, Connection)
            conn.execute(_INSERT_EVENT, rows)

    async def latest_event_id(self) -> int:
        """The newest event's id (0 when there is none): one index lookup."""
        return await self._read(self._latest_event_id)

    def _latest_event_id(self) -> int:
        with self._tx() as conn:
            return int(conn.execute(sa.select(sa.func.max(t.event.c.id))).scalar() or 0)

    async def list_events(
        self,
        stack_id: str,
        *,
        resource_name: str | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> list[EventRecord]:
        return await self._read(self._list_events, stack_id, resource_name, after_id, limit)

    def _list_events(
        self, stack_id: str, resource_name: str | None, after_id: int | None, limit: int | None
    ) -> list[EventRecord]:
        query = sa.select(t.event).where(t.event.c.stack_id == stack_id)
        if resource_name is not None:
            query = query.where(t.event.c.resource_name == resource_name)
        if after_id is not None:
            query = query.where(t.event.c.id > after_id)
        query = query.order_by(t.event.c.id)
        if limit is not None:
            query = query.limit(limit)
        with self._tx() as conn:
            rows = conn.execute(query).all()
        return [event_record(row) for row in rows]
