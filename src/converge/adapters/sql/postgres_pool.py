"""A few psycopg 3 async connections kept open for a store's hot statements.

The statements of a resource check run on the event loop (no hand-over to a store
thread and back, which cost two thread wake-ups per statement), each on a connection in
autocommit mode taken from here and given back. A store may be used from more than one
event loop over its life (a CLI command runs several): connections belong to the loop
they were opened on, so there is one set per loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from converge.errors import StoreError

# A connection idle longer than this is pinged before use: the server may have restarted
# since (SQLAlchemy's pool pings at every checkout; here only after idleness).
IDLE_PING_SECONDS = 10.0
# How long close() waits for statements still running before closing under them.
CLOSE_WAIT_SECONDS = 30.0

Connection = psycopg.AsyncConnection[Any]


class LoopConnections:
    """At most ``size`` connections on one event loop; a caller waits when all are busy."""

    def __init__(self, conninfo: str, size: int, configure: Callable[[Connection], None]) -> None:
        self._conninfo = conninfo
        self._size = size
        self._configure = configure
        self._idle: list[tuple[Connection, float]] = []
        self._opened = 0  # idle and in use
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closing = False
        self._all_back = asyncio.Event()

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """A connection for one statement; its errors on a lost connection are
        ``StoreError`` (and the connection is dropped: the next call opens another)."""
        conn = await self._acquire()
        try:
            yield conn
        except psycopg.OperationalError as exc:
            raise StoreError(f"database error: {exc}") from exc
        finally:
            await self._release(conn)

    def free(self) -> bool:
        """Whether a connection can be had now without waiting for one to come back."""
        return not self._closing and (bool(self._idle) or self._opened < self._size)

    async def _acquire(self) -> Connection:
        while True:
            if self._closing:
                raise StoreError("the store is closed")
            if self._idle:
                conn, used = self._idle.pop()
                if time.monotonic() - used < IDLE_PING_SECONDS or await _alive(conn):
                    return conn
                await self._discard(conn)
                continue
            if self._opened < self._size:
                self._opened += 1
                try:
                    return await self._connect()
                except BaseException:
                    self._opened -= 1
                    self._wake_one()
                    raise
            # A waiter is left in the queue when cancelled (``_wake_one`` skips it there):
            # removing it would scan a queue that holds thousands of checks at a time.
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            except BaseException:
                if waiter.done() and not waiter.cancelled():
                    self._wake_one()  # woken, then cancelled: the turn goes to the next
                raise

    async def _connect(self) -> Connection:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._conninfo, autocommit=True, prepare_threshold=0
            )
        except psycopg.OperationalError as exc:
            raise StoreError(f"cannot connect to the database: {exc}") from exc
        self._configure(conn)
        return conn

    async def _release(self, conn: Connection) -> None:
        reusable = (
            not self._closing
            and not conn.closed
            and conn.info.transaction_status == TransactionStatus.IDLE
        )
        if reusable:
            self._idle.append((conn, time.monotonic()))
            self._wake_one()
        else:
            await self._discard(conn)

    async def _discard(self, conn: Connection) -> None:
        await conn.close()  # never suspends: psycopg only finishes the libpq connection
        self._opened -= 1
        self._wake_one()
        if self._opened == 0:
            self._all_back.set()

    def _wake_one(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    async def close(self) -> None:
        """Close the connections; statements still running end first (within a limit)."""
        self._closing = True
        idle, self._idle = self._idle, []
        for conn, _used in idle:
            await self._discard(conn)
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)  # they see the store closing
        if self._opened:
            self._all_back.clear()
            with contextlib.suppress(TimeoutError):  # those still out close when given back
                await asyncio.wait_for(self._all_back.wait(), CLOSE_WAIT_SECONDS)

    def close_from_elsewhere(self) -> None:
        """Close idle connections of a loop that is not running (it has ended)."""
        self._closing = True
        idle, self._idle = self._idle, []
        for conn, _used in idle:
            conn.pgconn.finish()
            self._opened -= 1


async def _alive(conn: Connection) -> bool:
    try:
        await conn.execute(";")
    except psycopg.OperationalError:
        return False
    return True
