"""Short SQLite transactions run on the calling thread, when the file's write lock is free.

Handing a transaction to another thread and waking the event loop with its result costs
about 100 µs here; the transaction itself (a few indexed statements, WAL, no fsync at
commit) costs about 10. So the embedded mode runs its short, bounded transactions where
they are asked for, on the event loop, and never waits for a lock there: every
connection made here has a busy timeout of zero. When another connection (the store's own
thread, another process on the same file) holds the lock, the attempt is rolled back and
``Busy`` tells the caller to hand the work to a thread that may wait.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})


class Busy(Exception):
    """The database was locked by another connection; nothing was done."""


def is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return (code & 0xFF) in _BUSY_CODES
    return "locked" in str(exc)


class InlineSqlite:
    """Connections to one SQLite file, one per calling thread, that never wait for a lock.

    ``setup`` runs once on each new connection (pragmas, schema); ``factory`` is the
    connections' class. Connections are kept open: opening one costs more than the work
    it does.
    """

    def __init__(
        self,
        path: str | Path,
        setup: Callable[[sqlite3.Connection], None] | None = None,
        *,
        factory: type[sqlite3.Connection] = sqlite3.Connection,
    ) -> None:
        self.path = Path(path)
        self._setup = setup
        self._factory = factory
        self._local = threading.local()
        self._opened: list[sqlite3.Connection] = []
        self._guard = threading.Lock()
        self._closed = False

    def connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise sqlite3.ProgrammingError(f"{self.path} is closed")
            # check_same_thread off only so close() may close it from another thread.
            conn = sqlite3.connect(
                self.path,
                timeout=0,
                isolation_level=None,
                check_same_thread=False,
                factory=self._factory,
            )
            try:
                if self._setup is not None:
                    self._setup(conn)
            except BaseException:
                conn.close()
                raise
            with self._guard:
                self._opened.append(conn)
            self._local.conn = conn
        return conn

    def run(
        self,
        work: Callable[Concatenate[sqlite3.Connection, P], R],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """``work(connection, ...)`` in one write transaction, committed when it returns.

        Raises ``Busy`` (everything rolled back) when any statement found the file locked;
        any other error rolls back and propagates.
        """
        try:
            conn = self.connection()
        except sqlite3.OperationalError as exc:
            if is_busy(exc):  # its setup met a lock
                raise Busy(str(exc)) from exc
            raise
        try:
            conn.execute("BEGIN IMMEDIATE")
            result = work(conn, *args, **kwargs)
            if conn.in_transaction:
                conn.execute("COMMIT")
            return result
        except sqlite3.OperationalError as exc:
            _rollback(conn)
            if is_busy(exc):
                raise Busy(str(exc)) from exc
            raise
        except BaseException:
            _rollback(conn)
            raise

    def close(self) -> None:
        with self._guard:
            self._closed = True
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()


def _rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        conn.execute("ROLLBACK")
