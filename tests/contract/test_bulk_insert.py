"""Rows inserted many at once (COPY on PostgreSQL) are stored exactly as an INSERT through
SQLAlchemy stores them, and the driver's errors come out as SQLAlchemy's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

from converge.adapters.sql import tables as t
from converge.adapters.sql.bulk import COPY_FROM, insert_rows
from converge.adapters.sql.records import new_resource_row
from converge.adapters.sql.store import SqlStore
from converge.records import NewResource
from support.store_rows import new_stack

COUNT = COPY_FROM + 6


@pytest.fixture
def store(database_url: str) -> Iterator[SqlStore]:
    store = SqlStore.open(database_url)
    try:
        yield store
    finally:
        asyncio.run(store.close())


def _stack(store: SqlStore, name: str) -> str:
    return asyncio.run(new_stack(store, name))


def _rows(stack_id: str) -> list[dict[str, Any]]:
    news = [
        NewResource(
            name=f"r{i}",
            type="Test::Thing",
            requires=frozenset({i, 2 * i}),
            replaces=i if i % 3 == 0 else None,
            deletion_policy="Retain" if i % 2 else "Delete",
            host="h" if i % 5 == 0 else None,
        )
        for i in range(COUNT)
    ]
    return [new_resource_row(stack_id, new, 1_700_000_000.123456 + i) for i, new in enumerate(news)]


def _stored(store: SqlStore, stack_id: str) -> list[tuple[Any, ...]]:
    """Every column as the database holds it (JSON as its text), in insertion order."""
    text_columns = [
        sa.cast(column, sa.Text).label(column.name) if isinstance(column.type, sa.JSON) else column
        for column in t.resource.c
        if column.name not in ("id", "stack_id")
    ]
    with store._engine.connect() as conn:
        query = sa.select(*text_columns).where(t.resource.c.stack_id == stack_id)
        return [tuple(row) for row in conn.execute(query.order_by(t.resource.c.id))]


def test_bulk_rows_are_stored_as_an_insert_stores_them(store: SqlStore) -> None:
    by_insert, in_bulk = _stack(store, "by-insert"), _stack(store, "in-bulk")
    with store._engine.begin() as conn:
        conn.execute(t.resource.insert(), _rows(by_insert))
        insert_rows(conn, t.resource, _rows(in_bulk))
    assert len(_stored(store, in_bulk)) == COUNT
    assert _stored(store, in_bulk) == _stored(store, by_insert)
    # Python's None in a JSON column is JSON null, not SQL NULL, both ways.
    with store._engine.connect() as conn:
        nulls = conn.execute(
            sa.select(sa.func.count()).where(
                t.resource.c.stack_id == in_bulk, t.resource.c.hook_pending.is_(None)
            )
        ).scalar_one()
    assert nulls == 0


def test_bulk_rows_roll_back_with_their_transaction(store: SqlStore) -> None:
    stack_id = _stack(store, "rolled-back")
    with pytest.raises(RuntimeError), store._engine.begin() as conn:
        insert_rows(conn, t.resource, _rows(stack_id))
        raise RuntimeError("the transaction fails after the rows")
    assert _stored(store, stack_id) == []


def test_a_bulk_conflict_is_sqlalchemys_integrity_error(store: SqlStore) -> None:
    stack_id = _stack(store, "conflict")
    rows = _rows(stack_id)
    with store._engine.begin() as conn:
        conn.execute(t.resource.insert(), [{**rows[0], "id": 999_999}])
    clashing = [{**row, "id": 999_999 - i} for i, row in enumerate(rows)]
    with pytest.raises(sa.exc.IntegrityError), store._engine.begin() as conn:
        insert_rows(conn, t.resource, clashing)
