"""The test world: a simulated reality for the built-in test types, changeable out of band.

This is NOT real infrastructure. ``OS::Heat::None``, ``TestResource``, ``Value``,
``RandomString`` and ``Dummy`` make nothing real; so that drift can be produced on purpose
(by tests, and by ``converge world`` for demos), each of them records what it "made" in a
small SQLite file, one row per entity (type, physical id, properties). The file lives next
to the state file (``<state>.world.db``) and is named to plugins by the setting
``test_world``; several processes share it (``converge world`` changes it while
``converge serve`` runs), and SQLite's locking keeps each change atomic. One row per entity
keeps a change O(1): a stack of 10,000 test resources costs no more per resource than one
of 10. Without the setting the test types keep no reality: ``observe`` reports what was
applied, as a type with nothing to read would. The plugins' base class, ``WorldBacked``, is in
``world_backed.py``.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from converge.sqlite_inline import InlineSqlite
from converge.sqlite_joined import CallConnection, LoopJoins

P = ParamSpec("P")
R = TypeVar("R")

SETTING = "test_world"
Entities = dict[str, dict[str, dict[str, Any]]]  # type -> physical id -> entity

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entity (
    type TEXT NOT NULL,
    physical_id TEXT NOT NULL,
    properties TEXT NOT NULL,
    PRIMARY KEY (type, physical_id)
)
"""


def world_path_for(state: str | os.PathLike[str]) -> Path:
    """Where the test world of a state file lives: beside it, ``<state>.world.db``."""
    path = Path(state).resolve()
    return path.with_name(path.name + ".world.db")


class TestWorld:
    """The test world in one SQLite file; every call is one short transaction.

    Connections are per thread and kept open: opening one costs more than the change
    itself. Plugins go through ``call``: on the event loop (a change costs microseconds, a
    hand-over to a thread a hundred of them), the calls of one turn of the loop in one
    transaction, a locked file (another worker's, or ``converge world`` changing it) tried
    again on the loop shortly after (``sqlite_joined``).
    """

    __test__ = False  # not a pytest class

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Private from birth, like the state file: test types may hold generated secrets.
        with contextlib.suppress(FileExistsError):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self._local = threading.local()
        self._opening = threading.Lock()
        # Inline connections never wait: a locked file raises, and is tried again later.
        self._inline = InlineSqlite(
            self.path, lambda conn: self._prepare(conn, attempts=1), factory=CallConnection
        )
        self._joined = LoopJoins(self._inline)

    async def call(
        self,
        operation: Callable[Concatenate[sqlite3.Connection, P], R],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """``operation(connection, ...)`` in a write transaction joined with the other
        calls of this turn of the event loop."""
        return await self._joined.current().run(operation, *args, **kwargs)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            with self._opening:
                conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
                self._prepare(conn, attempts=100)
            self._local.conn = conn
        return conn

    def _prepare(self, conn: sqlite3.Connection, *, attempts: int) -> None:
        # Switching a new file to WAL needs it to itself and does not wait for a busy
        # file (another process opening it at the same moment): retry for a while.
        for attempt in range(attempts):
            try:
                conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == attempts - 1:
                    raise
                time.sleep(0.05)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute(_SCHEMA)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def snapshot(self) -> Entities:
        rows = self._connection().execute(
            "SELECT type, physical_id, properties FROM entity ORDER BY type, physical_id"
        )
        world: Entities = {}
        for type_name, physical_id, properties in rows:
            world.setdefault(type_name, {})[physical_id] = {"properties": json.loads(properties)}
        return world

    # --- entity operations (blocking; plugins go through ``call``) -------------------

    def get(self, type_name: str, physical_id: str) -> dict[str, Any] | None:
        return get_entity(self._connection(), type_name, physical_id)

    def put(self, type_name: str, physical_id: str, properties: Mapping[str, Any]) -> None:
        put_entity(self._connection(), type_name, physical_id, properties)

    def remove(self, type_name: str, physical_id: str) -> bool:
        """Delete an entity; False when it was not there."""
        return remove_entity(self._connection(), type_name, physical_id)

    def set_property(self, type_name: str, physical_id: str, name: str, value: Any) -> None:
        """Change one property out of band; ``KeyError`` naming what does not exist."""
        with self._transaction() as conn:
            row = conn.execute(
                "SELECT properties FROM entity WHERE type = ? AND physical_id = ?",
                (type_name, physical_id),
            ).fetchone()
            if row is None:
                raise KeyError(f"the test world has no {type_name} {physical_id!r}")
            properties = json.loads(row[0])
            properties[name] = value
            conn.execute(
                "UPDATE entity SET properties = ? WHERE type = ? AND physical_id = ?",
                (json.dumps(properties, sort_keys=True), type_name, physical_id),
            )

    def all_of(self, type_name: str) -> dict[str, dict[str, Any]]:
        return all_entities_of(self._connection(), type_name)


# --- the statements, on a given connection -------------------------------------------


def get_entity(conn: sqlite3.Connection, type_name: str, physical_id: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT properties FROM entity WHERE type = ? AND physical_id = ?",
        (type_name, physical_id),
    ).fetchone()
    return None if row is None else {"properties": json.loads(row[0])}


def put_entity(
    conn: sqlite3.Connection, type_name: str, physical_id: str, properties: Mapping[str, Any]
) -> None:
    conn.execute(
        "INSERT INTO entity (type, physical_id, properties) VALUES (?, ?, ?) "
        "ON CONFLICT (type, physical_id) DO UPDATE SET properties = excluded.properties",
        (type_name, physical_id, json.dumps(dict(properties), sort_keys=True)),
    )


def remove_entity(conn: sqlite3.Connection, type_name: str, physical_id: str) -> bool:
    done = conn.execute(
        "DELETE FROM entity WHERE type = ? AND physical_id = ?", (type_name, physical_id)
    )
    return done.rowcount == 1


def all_entities_of(conn: sqlite3.Connection, type_name: str) -> dict[str, dict[str, Any]]:
    rows = conn.execute(
        "SELECT physical_id, properties FROM entity WHERE type = ? ORDER BY physical_id",
        (type_name,),
    )
    return {pid: {"properties": json.loads(properties)} for pid, properties in rows}


def world_from(settings: Mapping[str, Any]) -> TestWorld | None:
    path = settings.get(SETTING)
    return _world_at(str(path)) if path else None


@functools.lru_cache(maxsize=16)
def _world_at(path: str) -> TestWorld:
    # Shared per path, so that each thread's connection is opened once, not per call.
    return TestWorld(path)
