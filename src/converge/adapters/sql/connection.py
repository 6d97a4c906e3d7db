"""The store's connection plumbing: engine, threads, and how a transaction runs.

Each public coroutine of the store is one short transaction run on the store's own
threads: one thread for SQLite (its single writer, so transactions never wait on each
other's locks), a small pool for PostgreSQL. ``_short`` runs a resource check's
transactions inline on a SQLite file, ``_read`` rides out a dropped connection, and
driver errors become converge's (``_database_error``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine

from converge.adapters import json_codec
from converge.adapters.sql import state_file
from converge.adapters.sql.sqlite_hot import SqliteHotPath
from converge.errors import StateError, StoreError
from converge.sqlite_inline import InlineSqlite
from converge.sqlite_joined import CallConnection, LoopJoins

if TYPE_CHECKING:  # psycopg comes with the postgres extra only: imported when used
    from converge.adapters.sql.postgres_hot import PostgresHotPath

P = ParamSpec("P")
R = TypeVar("R")

# A transaction's connection: SQLAlchemy's (store thread), or SQLite's own (inline).
Conn = Connection | sqlite3.Connection


class StoreBase:
    """What every part of the store runs on: the engine, the store's threads, the
    inline SQLite connection, the PostgreSQL hot path, and the first fatal error.

    Each concept (stacks, resources, sync points, ...) is a mixin over this base;
    ``SqlStore`` (``store.py``) is all of them.
    """

    def __init__(
        self,
        engine: Engine,
        *,
        clock: Callable[[], float] = time.time,
        location: str | None = None,
    ) -> None:
        self._engine = engine
        self._clock = clock
        # What errors name: the state file's path, or the database URL without password.
        self.location = location or safe_url(str(engine.url))
        # The first fatal error (damaged, full, unreadable state): every later call raises
        # it again, so nothing more is written and the run stops within seconds.
        self.failure: StateError | None = None
        self.is_sqlite = engine.dialect.name == "sqlite"
        workers = (
            1
            if self.is_sqlite
            else max(2, engine.pool.size() if hasattr(engine.pool, "size") else 4)
        )
        self._executor = ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix="converge-store"
        )
        # SQLite: the store's one thread keeps its connection (no pool checkout and reset
        # per transaction). PostgreSQL: connections come from the pool, which checks them.
        self._held = threading.local()
        self._hot = SqliteHotPath() if self.is_sqlite else None
        # PostgreSQL: the check's statements on psycopg, one round trip each.
        self._pg = _postgres_hot_path(engine)
        # SQLite file: the short transactions of a resource check run inline, on the
        # caller's thread, whenever the write lock is free (see ``_short``).
        database = engine.url.database if self.is_sqlite else None
        self._inline = (
            InlineSqlite(database, configure_sqlite, factory=CallConnection)
            if database and database != ":memory:" and not database.startswith("file:")
            else None
        )
        # The inline transactions of each event loop, joined per turn (``_short``).
        self._joined = LoopJoins(self._inline) if self._inline is not None else None

    def _discard(self) -> None:
        """Let go of a store that failed to open (no transaction ran on its threads)."""
        self._executor.shutdown(wait=True)
        if self._inline is not None:
            self._inline.close()
        self._engine.dispose()

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._release_held)
        # Transactions still running on the store's threads (their callers may have been
        # cancelled) end before the pool is disposed: a connection checked out across
        # dispose() is dropped without being closed.
        await loop.run_in_executor(None, functools.partial(self._executor.shutdown, wait=True))
        if self._inline is not None:
            self._inline.close()
        if self._pg is not None:
            await self._pg.close()
        self._engine.dispose()

    def _release_held(self) -> None:
        """Close the connection the SQLite store thread keeps (run on that thread)."""
        held: Connection | None = getattr(self._held, "conn", None)
        if held is not None:
            held.close()
            self._held.conn = None

    @property
    def url(self) -> str:
        return safe_url(str(self._engine.url))

    async def _run(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        self._raise_if_failed()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(
                self._executor, functools.partial(fn, *args, **kwargs)
            )
        except sa.exc.DatabaseError as exc:
            translated = self._database_error(
                exc.orig, passing=isinstance(exc, sa.exc.OperationalError)
            )
            if translated is None:
                raise
            raise translated from exc
        except sqlite3.DatabaseError as exc:  # the hot statements run on sqlite3 directly
            translated = self._database_error(
                exc, passing=isinstance(exc, sqlite3.OperationalError)
            )
            if translated is None:
                raise
            raise translated from exc

    async def _read(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """A read only: run again once on a fresh connection when the server dropped the
        one it used (a restart, pg_terminate_backend); it wrote nothing, so nothing is done
        twice. A reader following an operation then rides out a dropped connection."""
        try:
            return await self._run(fn, *args, **kwargs)
        except StoreError as exc:
            cause = exc.__cause__
            if not (isinstance(cause, sa.exc.DBAPIError) and cause.connection_invalidated):
                raise
            return await self._run(fn, *args, **kwargs)

    def _raise_if_failed(self) -> None:
        if self.failure is not None:
            raise StateError(self.failure.location, self.failure.reason)

    def _database_error(self, error: BaseException | None, *, passing: bool) -> StoreError | None:
        """A driver error as converge's: fatal ones (a damaged or full state) stick, and
        ``passing`` ones (a lock, a lost connection) are ``StoreError``. None for the
        rest (a bad statement, a constraint the code should have handled): bugs, raised
        as they are.
        """
        fatal = fatal_error(self.location, error)
        if fatal is not None:
            if self.failure is None:
                self.failure = fatal
            return fatal
        return StoreError(f"database error: {error}") if passing else None

    async def _short(
        self, work: Callable[Concatenate[Conn, P], R], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Run a short, bounded transaction ``work(conn, ...)``.

        On a SQLite file it runs inline, on the caller's thread: about a tenth of the cost
        of handing it to the store thread. Those of concurrent checks made in one turn of
        the event loop share one transaction, each in a savepoint of its own
        (``sqlite_joined``: a thousand checks claiming their rows commit a few times, not
        a thousand times); when another connection holds the write lock (the store's
        thread, another process) they are tried again on the loop shortly after. On
        PostgreSQL it runs on the store's thread. ``work`` must touch nothing but the
        database: it may be rolled back and run again; its ``conn.rollback()`` undoes its
        own writes only.
        """
        self._raise_if_failed()
        if self._joined is not None:
            try:
                return await self._joined.current().run(work, *args, **kwargs)
            except sqlite3.DatabaseError as exc:
                translated = self._database_error(
                    exc, passing=isinstance(exc, sqlite3.OperationalError)
                )
                if translated is None:
                    raise
                raise translated from exc
        return await self._run(self._in_tx, lambda conn: work(conn, *args, **kwargs))

    def _in_tx(self, work: Callable[[Conn], R]) -> R:
        with self._tx() as conn:
            return work(conn)

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back if it raises."""
        if not self.is_sqlite:
            with self._engine.begin() as conn:
                yield conn
            return
        held: Connection | None = getattr(self._held, "conn", None)
        if held is None or held.closed or held.invalidated:
            held = self._held.conn = self._engine.connect()
        with held.begin():
            yield held

    def _raw(self, conn: Conn) -> sqlite3.Connection | None:
        """SQLite's own connection under ``conn``, for the hot statements (None: PostgreSQL)."""
        if self._hot is None:
            return None
        if isinstance(conn, sqlite3.Connection):
            return conn
        raw = conn.connection.dbapi_connection
        assert isinstance(raw, sqlite3.Connection)
        return raw

    def _insert_ignore(self, table: sa.Table) -> Any:
        if self.is_sqlite:
            return sqlite.insert(table).on_conflict_do_nothing()
        if self._engine.dialect.name == "postgresql":
            return postgresql.insert(table).on_conflict_do_nothing()
        raise StoreError(f"unsupported database {self._engine.dialect.name}")


def _postgres_hot_path(engine: Engine) -> PostgresHotPath | None:
    """The PostgreSQL statements of a check (None on SQLite); psycopg is imported only
    here, as it is installed only with the ``postgres`` extra."""
    if engine.dialect.name != "postgresql":
        return None
    from converge.adapters.sql.postgres_hot import PostgresHotPath

    url = engine.url.set(drivername="postgresql")
    # As many connections as SQLAlchemy's pool keeps: the same concurrency either way.
    size = engine.pool.size() if hasattr(engine.pool, "size") else 4
    return PostgresHotPath(url.render_as_string(hide_password=False), size)


def create_engine(url: str, *, read_only: bool = False) -> Engine:
    if url.startswith("sqlite"):
        engine = sa.create_engine(
            url,
            connect_args={"isolation_level": None, "timeout": 30},
            json_serializer=json_codec.dumps,
            json_deserializer=json_codec.loads,
        )

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            if not read_only:  # journal_mode=WAL writes the file when it is not WAL yet
                configure_sqlite(dbapi_connection)
            dbapi_connection.execute("PRAGMA busy_timeout=30000")

        @sa.event.listens_for(engine, "begin")
        def _on_begin(connection: Connection) -> None:
            # Take the write lock up front: another process on the same file then waits
            # (busy_timeout) instead of failing a read-to-write upgrade mid-transaction.
            connection.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://") :]
    return sa.create_engine(
        url,
        pool_size=8,
        max_overflow=4,
        pool_pre_ping=True,
        json_serializer=json_codec.dumps,
        json_deserializer=json_codec.loads,
    )


def configure_sqlite(conn: sqlite3.Connection) -> None:
    """What every connection to the state file sets (busy timeouts differ: see callers)."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")


def fatal_error(location: str, error: BaseException | None) -> StateError | None:
    if isinstance(error, sqlite3.Error):
        return state_file.state_error(location, error)
    return None


def safe_url(url: str) -> str:
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<database>"
