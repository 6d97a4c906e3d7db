"""Concurrent hot statements sent together: one round trip and one commit for many.

A worker has thousands of checks in flight sharing a few connections, and each check's
statements were one round trip and one commit (a WAL flush) each. Here a statement joins
a queue; each of at most ``MAX_SENDERS`` senders holds a connection while the queue is
not empty and sends up to ``MAX_BATCH`` queued statements at a time in pipeline mode with
one Sync at the end. The server runs them one after the other in one implicit
transaction: one round trip, one commit, one wake-up of the backend for the lot. A
statement issued while nothing waits and no sender is at work is sent by its caller,
alone (``run``): one check at a time (a chain) starts no sender task.

Each statement keeps its meaning. Its compare-and-swap is in its own WHERE clause; a
later statement of the batch sees an earlier one's writes, as it would had each been
committed alone, one after the other; and a caller hears its result only once the batch
has committed. What changes is how long row locks are held: to the end of the batch.
So that two batches never wait on each other in a cycle, statements are sent in the
order of their resource id, and a statement that locks rows shared with other checks (a
successor's sync point, which every sender locks in the same order) goes last and alone
of its kind in a batch. Except finishes that lock one and the same group counter of a
big fan-in (``sync_part``) and nothing else shared: they go last together, as the
first would alone (the group's row, then maybe the target's: the same order for each);
and finishes that each lock one counter (``OneCounter``: a target waiting for a few
reports), last together in the order of their counters, so every batch takes those
locks in one order. Two batches could then only deadlock over one row touched by two
checks at once (a repeated delivery): PostgreSQL breaks that, and the fallback mends it.

The fallback: when the server rejects a batch (one statement's error, a deadlock) the
transaction rolled back as a whole, nothing was written, and each statement is run again
alone, in autocommit, so that one statement's error is its own and the others are not
lost. A statement the client cannot send (a parameter psycopg cannot adapt) gets its own
error; the batch sent before it is rolled back and goes again on another connection.
When the connection is lost instead, every statement of the batch gets the
``StoreError`` a lone statement would: a write may have committed, and it is the caller's
compare-and-swap to decide (as before).

Statements of one kind that each write one row of their own (the claims of many checks;
their finishes into one group of a big fan-in) may be joined in a batch into one
statement over all their rows (``Joinable``): each row keeps its own compare-and-swap,
and each caller hears its own outcome. Sending each of them was about a fifth of a busy
worker's time (psycopg's per-statement work under py-spy) and most of PostgreSQL's time
per claim besides. Joined statements are sent at their first one's place; in the
fallback each runs alone again.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from converge.adapters.sql.postgres_pool import Connection, LoopConnections
from converge.errors import StoreError

# Statements per batch: enough to share a commit among many checks, few enough that a
# batch's locks and its rollback (rare: an error, a deadlock) stay small.
MAX_BATCH = 64
# Connections sending at once per event loop. Fewer senders make bigger batches: with 8
# (the pool's size) PostgreSQL spent 8.1-8.4 s of CPU on 10,000 None on 2 workers, with
# 4 6.3 s, with 2 5.9 s (bench_distributed, load 3 to 3.7). Four keep a statement that
# waits on a lock from holding up every other check of the process.
MAX_SENDERS = 4
# How deep a batch is gathered from the queue (statements left for a later batch count).
MAX_SCAN = 8 * MAX_BATCH

Row = tuple[Any, ...] | None


@dataclass(frozen=True, slots=True)
class OneCounter:
    """A statement's only row that other checks lock too is one sync point's counter,
    ``key`` (a finish into a target waiting for a few reports). Such statements share a
    batch, last and in the order of their keys: every batch then takes those locks in
    one order, and two batches cannot wait on each other in a cycle."""

    key: tuple[Any, ...]


# The rows other checks lock too that a statement locks: None, none; a tuple, only this
# one group counter of a big fan-in (finishes with the same key can share a batch, and be
# joined); a ``OneCounter``, only that counter; True, others.
SharedKey = tuple[Any, ...] | OneCounter | bool | None


def _written(found: Row, rows: Sequence[Mapping[str, Any]]) -> list[Row]:
    """Each joined statement's result when the joined one's first column lists the
    positions of the rows it wrote: ``(1,)`` for those, None for the others."""
    written = set(found[0] or ()) if found is not None else set()
    return [(1,) if position in written else None for position in range(len(rows))]


@dataclass(frozen=True, slots=True)
class Joinable:
    """How a statement joins others of its ``kind`` in a batch: ``join([row, ...])`` is
    the (sql, params) of one statement for all their ``row``s, and ``split(its first row,
    the rows)`` each one's own result (by default: the joined statement's first column
    lists the positions of the rows it wrote, whose result is ``(1,)``, the others' None)."""

    kind: Hashable
    row: Mapping[str, Any]
    join: Callable[[Sequence[Mapping[str, Any]]], tuple[str, Mapping[str, Any]]]
    split: Callable[[Row, Sequence[Mapping[str, Any]]], list[Row]] = field(
        default=lambda found, rows: _written(found, rows)
    )


@dataclass(slots=True)
class _Statement:
    sql: str
    params: Mapping[str, Any]
    order: int  # the resource id it touches (batches are sent in this order)
    shared: SharedKey  # rows other checks lock too (sync points): last in a batch
    future: asyncio.Future[Row] = field(repr=False)
    # Makes (sql, params) when the statement is taken into a batch: callers that come
    # while it waits can still join it (``postgres_loads``).
    build: Callable[[], tuple[str, Mapping[str, Any]]] | None = None
    joinable: Joinable | None = None
    joined: list[_Statement] | None = None  # a statement made of these (``Joinable``)


class StatementBatcher:
    """The hot statements of one event loop, sent in batches on ``connections``."""

    def __init__(self, connections: LoopConnections, size: int) -> None:
        self._connections = connections
        self._max_senders = min(size, MAX_SENDERS)
        self._max = MAX_BATCH
        self._queue: deque[_Statement] = deque()
        self._senders = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(
        self,
        sql: str,
        params: Mapping[str, Any],
        *,
        order: int = 0,
        shared: SharedKey = None,
        build: Callable[[], tuple[str, Mapping[str, Any]]] | None = None,
        joinable: Joinable | None = None,
    ) -> Row:
        """The statement's first row (None when it returns none), once it committed: as
        ``submit``'s, but when nothing waits and no sender is at work the caller sends it
        itself, alone, on a free connection (a chain's next link: no task to start, no
        hand-over of the result; about 50 µs of client CPU per statement)."""
        if self._queue or self._senders or not self._connections.free():
            return await self.submit(
                sql, params, order=order, shared=shared, build=build, joinable=joinable
            )
        loop = asyncio.get_running_loop()
        statement = _Statement(sql, params, order, shared, loop.create_future(), build)
        self._senders += 1  # statements coming meanwhile start senders of their own
        try:
            if statement.build is None or _built(statement):
                async with self._connections.connection() as conn:
                    await _alone(conn, statement)
        finally:
            self._senders -= 1
        return await statement.future

    def submit(
        self,
        sql: str,
        params: Mapping[str, Any],
        *,
        order: int = 0,
        shared: SharedKey = None,
        build: Callable[[], tuple[str, Mapping[str, Any]]] | None = None,
        joinable: Joinable | None = None,
    ) -> asyncio.Future[Row]:
        """Queue the statement (made by ``build`` when it is taken, if given; joined with
        others of its kind when ``joinable``); its future is its first row once it
        committed."""
        loop = asyncio.get_running_loop()
        statement = _Statement(
            sql,
            params,
            order,
            shared,
            loop.create_future(),
            build,
            # Joined: statements on no shared row, or on one and the same group counter.
            None if shared is True else joinable,
        )
        self._queue.append(statement)
        if self._senders < self._max_senders:
            self._senders += 1
            task = loop.create_task(self._send_queued())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return statement.future

    async def _send_queued(self) -> None:
        """Send batches on one connection while statements wait; on a lost connection,
        go on with another (a batch that cannot get one fails, so nobody waits forever)."""
        try:
            while self._queue:
                try:
                    async with self._connections.connection() as conn:
                        while self._queue:
                            if not await self._send(conn, self._take()):
                                break  # the connection is lost: the next is another
                except StoreError as exc:  # cannot connect, or the store is closing
                    _fail(self._take(), exc)
        finally:
            self._senders -= 1

    def _take(self) -> list[_Statement]:
        """The next batch: in order of resource id, then the statements on shared rows,
        last: one, or several locking the same group counter only. The queue is looked
        through up to ``MAX_SCAN`` deep for those: finishes into a big fan-in arrive
        interleaved by group, and taking only the first few of a group made batches of
        one to five statements where 64 waited."""
        taken: list[_Statement] = []
        shared: list[_Statement] = []
        kept: list[_Statement] = []
        scanned = 0
        while self._queue and len(taken) + len(shared) < self._max and scanned < MAX_SCAN:
            statement = self._queue.popleft()
            scanned += 1
            if statement.future.done():
                continue  # its caller was cancelled while it waited
            if statement.joinable is None and statement.build is not None and not _built(statement):
                continue
            if not statement.shared:
                taken.append(statement)
            elif not shared or _share_a_batch(shared[0].shared, statement.shared):
                shared.append(statement)
            else:
                kept.append(statement)
        self._queue.extendleft(reversed(kept))
        taken.sort(key=lambda statement: statement.order)
        shared.sort(key=_lock_order)
        return _joined(taken) + _joined(shared)

    async def _send(self, conn: Connection, batch: list[_Statement]) -> bool:
        """Run ``batch`` and hand out its results; False when the connection was lost."""
        if not batch:
            return True  # every caller of those taken was cancelled
        try:
            if len(batch) == 1:
                return await _alone(conn, batch[0])
            try:
                rows = await _together(conn, batch)
            except _Abandoned as abandoned:
                # Its error is the client's own and would be the same alone. The others
                # were rolled back: they go first in the next batch, on another
                # connection (psycopg's record of what this one prepared may be off).
                _fail([abandoned.statement], abandoned.error)
                self._queue.extendleft(reversed([s for s in batch if s is not abandoned.statement]))
                await conn.close()
                return False
            except psycopg.Error as exc:
                if not _rolled_back(conn, exc):
                    _fail(batch, StoreError(f"database error: {exc}"))
                    return False
                for statement in _members(batch):  # nothing was written: each on its own
                    if statement.joinable is not None and not _alone_built(statement):
                        continue
                    if not await _alone(conn, statement):
                        _fail(batch, StoreError(f"database error: {exc}"))
                        return False
                return True
            for statement, row in zip(batch, rows, strict=True):
                _resolve(statement, row)
            return True
        except Exception as exc:  # a bug: its callers get it, the others go on
            _fail(batch, exc)
            return False  # in whatever state the connection is: the next is another
        except BaseException:  # cancelled (the loop is ending): nobody waits forever
            _fail(batch, StoreError("the store's event loop is ending"))
            raise


def _share_a_batch(first: SharedKey, other: SharedKey) -> bool:
    """Whether a statement on shared rows may follow ``first``'s in a batch: on one and
    the same group counter, or each on one counter of its own (``OneCounter``)."""
    if isinstance(first, OneCounter):
        return isinstance(other, OneCounter)
    return isinstance(first, tuple) and other == first


def _lock_order(statement: _Statement) -> tuple[Any, ...]:
    """Where a statement on shared rows goes among them: by its counter, then its row."""
    if isinstance(statement.shared, OneCounter):
        return (*statement.shared.key, statement.order)
    return (statement.order,)


class _Abandoned(Exception):
    """A batch rolled back by the client: ``statement`` could not be sent (``error``)."""

    def __init__(self, statement: _Statement, error: psycopg.Error) -> None:
        super().__init__(str(error))
        self.statement = statement
        self.error = error


async def _together(conn: Connection, batch: list[_Statement]) -> list[Row]:
    """The statements in one pipeline, one Sync: one implicit transaction."""
    cursors = [conn.cursor() for _ in batch]
    async with conn.pipeline():
        for cursor, statement in zip(cursors, batch, strict=True):
            try:
                await cursor.execute(statement.sql, statement.params)
            except psycopg.Error as exc:
                if exc.sqlstate is not None or conn.broken or conn.closed:
                    raise  # the server's error: the Sync ends the transaction, rolled back
                # The client's own (a parameter it cannot send): the statements before it
                # were sent and the Sync would commit them; a ROLLBACK first undoes them.
                await conn.cursor().execute("ROLLBACK")
                raise _Abandoned(statement, exc) from exc
    return [await cursor.fetchone() if cursor.description else None for cursor in cursors]


async def _alone(conn: Connection, statement: _Statement) -> bool:
    """One statement in its own transaction; its error is its caller's. False when the
    connection was lost."""
    if statement.future.done():
        return True
    try:
        cursor = await conn.execute(statement.sql, statement.params)
        row = await cursor.fetchone() if cursor.description else None
    except psycopg.Error as exc:
        lost = conn.broken or conn.closed
        if lost or isinstance(exc, psycopg.OperationalError):
            _fail([statement], StoreError(f"database error: {exc}"))
        elif statement.joined is not None:  # nothing was written: whose error, alone
            for member in statement.joined:
                if _alone_built(member) and not await _alone(conn, member):
                    _fail(statement.joined, StoreError(f"database error: {exc}"))
                    return False
        else:
            _fail([statement], exc)  # a bug (a bad statement): as it is
        return not lost
    _resolve(statement, row)
    return True


def _joined(statements: list[_Statement]) -> list[_Statement]:
    """``statements`` with those of one joinable kind made one, at the first one's place;
    a kind with one statement in the batch is sent as itself."""
    kinds: dict[Hashable, list[_Statement]] = {}
    places: list[_Statement | list[_Statement]] = []
    for statement in statements:
        if statement.joinable is None:
            places.append(statement)
            continue
        group = kinds.get(statement.joinable.kind)
        if group is None:
            group = kinds[statement.joinable.kind] = []
            places.append(group)
        group.append(statement)
    batch = []
    for place in places:
        if isinstance(place, _Statement):
            batch.append(place)
        elif len(place) > 1:
            batch.append(_join(place))
        elif _alone_built(place[0]):
            batch.append(place[0])
    return batch


def _join(statements: list[_Statement]) -> _Statement:
    first = statements[0]
    assert first.joinable is not None
    sql, params = first.joinable.join([s.joinable.row for s in statements if s.joinable])
    future: asyncio.Future[Row] = asyncio.get_running_loop().create_future()
    return _Statement(sql, params, first.order, None, future, joined=statements)


def _alone_built(statement: _Statement) -> bool:
    """A joinable statement sent alone: made now (False when that failed)."""
    statement.joinable = None
    return statement.build is None or _built(statement)


def _members(batch: list[_Statement]) -> list[_Statement]:
    """The statements whose callers wait: a joined statement's own ones."""
    return [member for statement in batch for member in statement.joined or (statement,)]


def _built(statement: _Statement) -> bool:
    """Make the statement's text and parameters now; False (its caller has the error)
    when that failed."""
    assert statement.build is not None
    build, statement.build = statement.build, None
    try:
        statement.sql, statement.params = build()
    except Exception as exc:  # a bug: its caller's alone
        statement.future.set_exception(exc)
        return False
    return True


def _rolled_back(conn: Connection, exc: psycopg.Error) -> bool:
    """The server answered with an error (its transaction rolled back) and the
    connection is still usable. Not when the connection failed, nor on an error of the
    client's own (no SQLSTATE: statements queued before it may have been committed)."""
    return exc.sqlstate is not None and not conn.broken and not conn.closed


def _resolve(statement: _Statement, row: Row) -> None:
    if statement.joined is not None:
        joinable = statement.joined[0].joinable
        assert joinable is not None
        rows = [member.joinable.row for member in statement.joined if member.joinable]
        for member, own in zip(statement.joined, joinable.split(row, rows), strict=True):
            _resolve(member, own)
        return
    if not statement.future.done():
        statement.future.set_result(row)


def _fail(batch: list[_Statement], exc: BaseException) -> None:
    for statement in _members(batch):
        if not statement.future.done():
            statement.future.set_exception(exc)
