"""The change feed's order when several processes write events at once (PostgreSQL): a
reader never goes past an id that a transaction still running may commit, and goes past
one that was rolled back. On SQLite one writer at a time makes that hold by itself."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import psycopg
import pytest

from converge.adapters.sql.feed import EventFeed, FeedReader
from converge.adapters.sql.store import SqlStore
from converge.core.states import Action

pytestmark = pytest.mark.postgres

INSERT = (
    "INSERT INTO event (stack_id, resource_name, physical_resource_id, resource_type, action, "
    "status, reason, created_at) VALUES (%s, %s, NULL, 'OS::Heat::None', 'CREATE', "
    "'COMPLETE', '', 0) RETURNING id"
)


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[SqlStore]:
    opened = SqlStore.open(postgres_url)
    try:
        yield opened
    finally:
        await opened.close()


async def _reader(store: SqlStore) -> tuple[str, FeedReader]:
    stack = await store.create_stack(
        "s",
        "p",
        action=Action.CREATE,
        disable_rollback=False,
        timeout_mins=None,
        drift_policy="notify",
    )
    feed = EventFeed(store)
    return stack.id, feed.reader("p", await feed.last_id())


def _insert(conn: psycopg.Connection, stack_id: str, name: str) -> int:
    row = conn.execute(INSERT, (stack_id, name)).fetchone()
    assert row is not None
    return int(row[0])


async def test_an_event_committed_after_a_later_id_is_not_skipped(
    store: SqlStore, postgres_url: str
) -> None:
    stack_id, reader = await _reader(store)
    with (
        psycopg.connect(postgres_url) as slow,
        psycopg.connect(postgres_url, autocommit=True) as fast,
    ):
        first = _insert(slow, stack_id, "slow")  # its transaction is still open
        second = _insert(fast, stack_id, "fast")
        assert second > first
        assert await reader.next() == []  # "fast" must wait for "slow"
        time.sleep(0.2)
        assert await reader.next() == []  # however long "slow" runs
        slow.commit()
        names = [item.event.resource_name for item in await reader.next()]
        assert names == ["slow", "fast"]
        assert await reader.next() == []


async def test_an_id_rolled_back_is_passed_over(store: SqlStore, postgres_url: str) -> None:
    stack_id, reader = await _reader(store)
    with (
        psycopg.connect(postgres_url) as failed,
        psycopg.connect(postgres_url, autocommit=True) as fast,
    ):
        _insert(failed, stack_id, "never")
        _insert(fast, stack_id, "fast")
        assert await reader.next() == []
        failed.rollback()
        deadline = time.monotonic() + 5
        names: list[str] = []
        while not names and time.monotonic() < deadline:
            names = [item.event.resource_name for item in await reader.next()]
            time.sleep(0.02)
        assert names == ["fast"]


async def test_a_reader_behind_passes_over_old_gaps_in_order(
    store: SqlStore, postgres_url: str
) -> None:
    stack_id, reader = await _reader(store)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        committed = []
        for index in range(3):
            with conn.transaction(force_rollback=True):
                _insert(conn, stack_id, f"rolled back {index}")
            committed.append(_insert(conn, stack_id, f"kept {index}"))
    deadline = time.monotonic() + 5
    seen: list[int] = []
    while len(seen) < 3 and time.monotonic() < deadline:
        seen += [item.event.id for item in await reader.next()]
        time.sleep(0.02)
    assert seen == committed
