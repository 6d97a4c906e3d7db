"""A project's change feed: the events of all its stacks after a given event id, in id order.

The ``event`` table's ids are the feed's sequence: every stack event, resource status change
and drift notification is written there in the transaction that makes the change, so a
reader that resumes after the last id it saw misses nothing and sees nothing twice.

On SQLite one writer at a time takes ids and commits, so ids become visible in order. On
PostgreSQL several processes write at once: a transaction may take id 10, another id 11
and commit first. A reader that went on past 11 would never see 10. So ``FeedReader``
reads no further than the first id missing from the sequence until that id is either
committed or given up: no transaction of the database that was running when the gap was
first seen runs any more (a rollback leaves a gap for good). Running transactions are read
from ``pg_stat_activity`` (its ``backend_xid`` is shown to every role).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from converge.adapters.sql import tables as t
from converge.adapters.sql.records import event_record
from converge.adapters.sql.store import SqlStore
from converge.records import EventRecord

# How many ids one look for gaps covers (a reader far behind catches up in steps).
_SCAN = 1000
# A gap is given up no sooner than this: the transaction that took the missing id may not
# have shown up as running yet (it takes the id a moment before its transaction id).
_GAP_MIN_AGE = 0.05

_IN_FLIGHT = sa.text(
    "SELECT backend_xid::text FROM pg_stat_activity "
    "WHERE datname = current_database() AND backend_xid IS NOT NULL "
    "AND pid <> pg_backend_pid()"
)


@dataclass(frozen=True)
class FeedEvent:
    event: EventRecord
    stack_name: str


@dataclass(frozen=True)
class _Gaps:
    """What may still commit the ids missing up to ``upto`` (the highest id visible when
    they were seen): a transaction that took one of them took it before ``upto`` was
    taken and committed, so it was running then, or has ended since."""

    upto: int
    seen_at: float
    running: frozenset[str]  # transactions of the database running when they were seen


@dataclass
class FeedReader:
    """One client's position in the feed: ``next()`` gives the events after it, in order,
    and never one past an id that may still be committed (see the module's docstring)."""

    store: SqlStore
    project_id: str
    after_id: int
    stack_id: str | None = None
    _gaps: tuple[_Gaps, ...] = field(default=(), repr=False)

    async def next(self, limit: int = 500) -> list[FeedEvent]:
        batch, self.after_id, self._gaps = await self.store._read(
            self._next, self.after_id, self._gaps, limit
        )
        return batch

    def _next(
        self, after_id: int, gaps: tuple[_Gaps, ...], limit: int
    ) -> tuple[list[FeedEvent], int, tuple[_Gaps, ...]]:
        with self.store._tx() as conn:
            if self.store.is_sqlite:
                rows = _events(conn, self.project_id, self.stack_id, after_id, None, limit)
                return _feed(rows), (rows[-1].id if rows else after_id), ()
            ids = conn.execute(
                sa.select(t.event.c.id)
                .where(t.event.c.id > after_id)
                .order_by(t.event.c.id)
                .limit(_SCAN)
            ).scalars()
            upto, gaps = _settled(conn, after_id, list(ids), gaps)
            rows = _events(conn, self.project_id, self.stack_id, after_id, upto, limit)
        if len(rows) == limit:
            upto = rows[-1].id  # the rest next time
        return _feed(rows), upto, gaps


def _settled(
    conn: sa.Connection, after_id: int, ids: Sequence[int], watched: tuple[_Gaps, ...]
) -> tuple[int, tuple[_Gaps, ...]]:
    """The highest id up to which every id is settled (visible, or missing for good), and
    the gaps still watched above it.

    The ids missing up to a watch's ``upto`` are given up (rolled back, or never to come)
    once none of the transactions that ran when it was made runs any more."""
    if not ids or ids[-1] - after_id == len(ids):  # nothing visible, or nothing missing
        return (ids[-1] if ids else after_id), ()
    running = _running(conn)
    now = time.monotonic()
    upto = after_id
    pending: list[_Gaps] = []
    for gaps in watched:
        if now - gaps.seen_at >= _GAP_MIN_AGE and not gaps.running & running:
            upto = max(upto, gaps.upto)
        else:
            pending.append(gaps)
    for found in ids:  # then as far as the visible ids follow on without a gap
        if found == upto + 1:
            upto = found
        elif found > upto:
            break
    if upto >= ids[-1]:
        return upto, ()
    pending = [gaps for gaps in pending if gaps.upto > upto]
    if not pending or pending[-1].upto < ids[-1]:
        pending.append(_Gaps(ids[-1], now, running))
    return upto, tuple(pending)


def _running(conn: sa.Connection) -> frozenset[str]:
    return frozenset(conn.execute(_IN_FLIGHT).scalars())


def _events(
    conn: sa.Connection,
    project_id: str,
    stack_id: str | None,
    after_id: int,
    upto: int | None,
    limit: int,
) -> Sequence[sa.Row[tuple[object, ...]]]:
    query = (
        sa.select(t.event, t.stack.c.name.label("stack_name"))
        .join(t.stack, t.stack.c.id == t.event.c.stack_id)
        .where(t.event.c.id > after_id, t.stack.c.project_id == project_id)
        .order_by(t.event.c.id)
        .limit(limit)
    )
    if upto is not None:
        query = query.where(t.event.c.id <= upto)
    if stack_id is not None:
        query = query.where(t.event.c.stack_id == stack_id)
    return conn.execute(query).all()


def _feed(rows: Sequence[sa.Row[tuple[object, ...]]]) -> list[FeedEvent]:
    return [
        FeedEvent(
            event_record(row),
            row.stack_name,
        )
        for row in rows
    ]


class EventFeed:
    """Reads the feed over the ``SqlStore``'s engine and threads."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    def reader(self, project_id: str, after_id: int, *, stack_id: str | None = None) -> FeedReader:
        """A reader of the project's events after ``after_id`` (of one stack, if given)."""
        return FeedReader(self._store, project_id, after_id, stack_id)

    async def last_id(self) -> int:
        """The newest event id of all (0 when there are none): where a live feed starts."""
        return await self._store._run(self._last_id)

    def _last_id(self) -> int:
        with self._store._tx() as conn:
            value = conn.execute(sa.select(sa.func.max(t.event.c.id))).scalar_one_or_none()
        return int(value or 0)
