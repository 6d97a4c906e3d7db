"""The store every contract test runs on: each SQL path, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from converge.adapters.sql.store import SqlStore


@pytest.fixture(params=["sqlite", "sqlite-store-thread", "postgresql", "postgresql-sqlalchemy"])
async def store(request: pytest.FixtureRequest, tmp_path: object) -> AsyncIterator[SqlStore]:
    if request.param.startswith("postgresql"):
        url = str(request.getfixturevalue("postgres_url"))
    else:
        url = f"sqlite:///{tmp_path}/converge.db"
    store = SqlStore.open(url)
    if request.param == "sqlite-store-thread":
        # A SQLite database with no inline connection (in memory, a ``file:`` URI):
        # every transaction on the store's own thread.
        store._joined = None
    if request.param == "postgresql-sqlalchemy":
        # PostgreSQL without its psycopg statements (postgres_hot): SQLAlchemy's path.
        assert store._pg is not None
        store._pg = None
    try:
        yield store
    finally:
        await store.close()
