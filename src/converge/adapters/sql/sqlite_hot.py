"""The statements of a resource check, run on SQLite's own connection (embedded mode).

Every resource a traversal converges costs a handful of short statements (read the stack
and the row, compare-and-swap the row, add events, report to a sync point). Through
SQLAlchemy each one spends far more CPU in Python (parameter processing, execution
context, result wrapping) than SQLite spends running it, and the embedded mode has one
store thread, so that overhead is what bounds a traversal's speed. Here the same SQL runs
on the ``sqlite3`` connection inside the SQLAlchemy transaction the store opened.

``tables.py`` stays the one schema: columns and JSON columns are read from it, and the
rows given back have the attributes of SQLAlchemy's rows, so ``records.py`` turns them into
records with the same code. The contract tests run every store operation on SQLite (this
path) and PostgreSQL (SQLAlchemy's) against the same expectations.
"""

from __future__ import annotations

import sqlite3
from collections import namedtuple
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from converge.adapters import json_codec
from converge.adapters.sql import tables as t


class _Table:
    """One table's columns: how to read a whole row and which columns hold JSON."""

    def __init__(self, table: sa.Table, *, skip: Iterable[str] = ()) -> None:
        skipped = set(skip)
        self.name = table.name
        self.columns = [c.name for c in table.c if c.name not in skipped]
        self.json = frozenset(c.name for c in table.c if isinstance(c.type, sa.JSON))
        self._json_at = [i for i, name in enumerate(self.columns) if name in self.json]
        self.row_type = namedtuple(f"{table.name}_row", self.columns)  # type: ignore[misc]
        self.select = f"SELECT {', '.join(self.columns)} FROM {table.name}"

    def row(self, values: Sequence[Any]) -> Any:
        decoded = list(values)
        for i in self._json_at:
            decoded[i] = _json_value(decoded[i])
        return self.row_type(*decoded)

    def bind(self, name: str, value: Any) -> Any:
        """A Python value as this column stores it (JSON as SQLAlchemy's JSON type does)."""
        return json_codec.dumps(value) if name in self.json else value


def _json_value(text: str | None) -> Any:
    # Most JSON columns hold an empty value: those are made here, a fresh one each time
    # as the decoder would, at a fraction of a decoder call (a listing reads 7 per row).
    if text is None or text == "null":
        return None
    if text == "{}":
        return {}
    if text == "[]":
        return []
    return json_codec.loads(text)


_STACK = _Table(t.stack, skip=["current_deps"])  # the graph can be megabytes: never here
_RESOURCE = _Table(t.resource)
_EVENT = _Table(t.event)
_REPORT = _Table(t.sync_report)

_SYNC_POINT = "traversal_id = ? AND target_resource_id = ? AND target_is_update = ?"
# The writer holds the file's lock for the whole transaction (BEGIN IMMEDIATE), so this is
# atomic here anyway; it is the same statement as PostgreSQL's, where the row lock is what
# serializes two reporters.
_COUNT_NEW_REPORT = (
    "INSERT INTO sync_point "
    "(traversal_id, target_resource_id, target_is_update, stack_id, received) "
    "VALUES (?, ?, ?, ?, 1) "
    "ON CONFLICT (traversal_id, target_resource_id, target_is_update) "
    "DO UPDATE SET received = sync_point.received + 1 RETURNING received"
)


class SqliteHotPath:
    """The hot statements on a ``sqlite3`` connection; each runs in the caller's transaction."""

    def __init__(self) -> None:
        self._updates: dict[tuple[str, ...], str] = {}
        self._event_sql = _insert_sql(_EVENT, [c for c in _EVENT.columns if c != "id"])
        self._report_sql = _insert_sql(_REPORT, _REPORT.columns).replace(
            "INSERT", "INSERT OR IGNORE", 1
        )

    def stack(self, raw: sqlite3.Connection, stack_id: str) -> Any | None:
        found = raw.execute(f"{_STACK.select} WHERE id = ?", (stack_id,)).fetchone()
        return None if found is None else _STACK.row(found)

    def find_stack(
        self, raw: sqlite3.Connection, name_or_id: str, project_id: str, include_deleted: bool
    ) -> Any | None:
        """The project's newest stack with this name or id (live ones only, unless asked)."""
        live = "" if include_deleted else " AND deleted_marker = ''"
        found = raw.execute(
            f"{_STACK.select} WHERE project_id = ? AND (name = ? OR id = ?){live} "
            "ORDER BY created_at DESC LIMIT 1",
            (project_id, name_or_id, name_or_id),
        ).fetchone()
        return None if found is None else _STACK.row(found)

    def current_traversal(self, raw: sqlite3.Connection, stack_id: str) -> str | None:
        found = raw.execute(
            "SELECT current_traversal FROM stack WHERE id = ?", (stack_id,)
        ).fetchone()
        return None if found is None else found[0]

    def resource(self, raw: sqlite3.Connection, resource_id: int) -> Any | None:
        found = raw.execute(f"{_RESOURCE.select} WHERE id = ?", (resource_id,)).fetchone()
        return None if found is None else _RESOURCE.row(found)

    def resources_of_stack(self, raw: sqlite3.Connection, stack_id: str) -> list[Any]:
        found = raw.execute(f"{_RESOURCE.select} WHERE stack_id = ? ORDER BY id", (stack_id,))
        return [_RESOURCE.row(values) for values in found]

    def reports(
        self, raw: sqlite3.Connection, traversal_id: str, resource_id: int, is_update: bool
    ) -> list[tuple[int, bool, Any]]:
        rows = raw.execute(
            "SELECT sender_resource_id, sender_is_update, data FROM sync_report "
            f"WHERE {_SYNC_POINT}",
            (traversal_id, resource_id, is_update),
        ).fetchall()
        return [(sender, bool(is_upd), json_codec.loads(data)) for sender, is_upd, data in rows]

    def count_reports(
        self, raw: sqlite3.Connection, traversal_id: str, resource_id: int, is_update: bool
    ) -> int:
        found = raw.execute(
            f"SELECT count(*) FROM sync_report WHERE {_SYNC_POINT}",
            (traversal_id, resource_id, is_update),
        ).fetchone()
        return int(found[0])

    def cas_resource(
        self,
        raw: sqlite3.Connection,
        resource_id: int,
        expected_key: int,
        values: Mapping[str, Any],
    ) -> bool:
        """``UPDATE ... WHERE id = ? AND atomic_key = ?``; True when the row was ours."""
        names = tuple(values)
        sql = self._updates.get(names)
        if sql is None:
            unknown = set(names) - set(_RESOURCE.columns)
            if unknown:
                raise ValueError(f"resource has no column {sorted(unknown)}")
            assignments = ", ".join(f"{name} = ?" for name in names)
            sql = f"UPDATE resource SET {assignments} WHERE id = ? AND atomic_key = ?"
            self._updates[names] = sql
        params = [_RESOURCE.bind(name, value) for name, value in values.items()]
        params += [resource_id, expected_key]
        return raw.execute(sql, params).rowcount == 1

    def insert_resource(self, raw: sqlite3.Connection, values: Mapping[str, Any]) -> int:
        names = [name for name in _RESOURCE.columns if name in values]
        sql = _insert_sql(_RESOURCE, names)
        cursor = raw.execute(sql, [_RESOURCE.bind(name, values[name]) for name in names])
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def insert_resources(self, raw: sqlite3.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Many new rows (dicts of the same columns): a create's 1,000 took 60 ms through
        SQLAlchemy's executemany (its JSON type and parameter processing), 15 here."""
        names = [name for name in _RESOURCE.columns if name in rows[0]]
        raw.executemany(
            _insert_sql(_RESOURCE, names),
            [[_RESOURCE.bind(name, row[name]) for name in names] for row in rows],
        )

    def delete_resource(self, raw: sqlite3.Connection, resource_id: int, expected_key: int) -> bool:
        done = raw.execute(
            "DELETE FROM resource WHERE id = ? AND atomic_key = ?", (resource_id, expected_key)
        )
        return done.rowcount == 1

    def add_events(self, raw: sqlite3.Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        columns = [c for c in _EVENT.columns if c != "id"]
        raw.executemany(self._event_sql, [[row[c] for c in columns] for row in rows])

    def add_report(self, raw: sqlite3.Connection, row: Mapping[str, Any]) -> bool:
        """Insert a report; False when it was already there (a duplicate delivery)."""
        params = [_REPORT.bind(c, row[c]) for c in _REPORT.columns]
        return raw.execute(self._report_sql, params).rowcount == 1

    def count_new_report(
        self,
        raw: sqlite3.Connection,
        stack_id: str,
        traversal_id: str,
        resource_id: int,
        is_update: bool,
    ) -> int:
        """Add one to the sync point's count of predecessors heard from; the new count."""
        found = raw.execute(_COUNT_NEW_REPORT, (traversal_id, resource_id, is_update, stack_id))
        return int(found.fetchone()[0])

    def received(
        self, raw: sqlite3.Connection, traversal_id: str, resource_id: int, is_update: bool
    ) -> int:
        found = raw.execute(
            f"SELECT received FROM sync_point WHERE {_SYNC_POINT}",
            (traversal_id, resource_id, is_update),
        ).fetchone()
        return 0 if found is None else int(found[0])


def _insert_sql(table: _Table, columns: Sequence[str]) -> str:
    marks = ", ".join("?" for _ in columns)
    return f"INSERT INTO {table.name} ({', '.join(columns)}) VALUES ({marks})"
