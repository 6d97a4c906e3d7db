"""PostgreSQL's check statements (``postgres_hot``) and the connections they run on.

The rows they read and write are held to the same contract as every other path in
``test_store.py``; here: the round trips, lost and busy connections, closing, and a store
used from more than one event loop.
"""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import AsyncIterator

import psycopg
import pytest

from converge.adapters.sql.store import SqlStore
from converge.core.states import Status
from converge.core.traversal import STACK_NODE, GraphNode
from converge.errors import StoreError
from converge.records import NewEvent
from support.store_rows import named, stack_with_rows


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[SqlStore]:
    opened = SqlStore.open(postgres_url)
    try:
        yield opened
    finally:
        await opened.close()


async def _stack_with_row(store: SqlStore) -> tuple[str, int, int]:
    stack_id, (row,) = await stack_with_rows(store, named(1))
    return stack_id, row.id, row.atomic_key


def _backends(url: str) -> int:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url) as conn:
        found = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchone()
    assert found is not None
    return int(found[0])


def _terminate_others(url: str) -> int:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return len(rows)


async def test_a_check_is_one_statement_per_read_claim_and_finish(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    stack_id, row_id, key = await _stack_with_row(store)
    sent: Counter[str] = Counter()
    execute = psycopg.AsyncConnection.execute

    async def counting(self: psycopg.AsyncConnection, query: str, *args: object) -> object:
        sent[query.split()[0]] += 1
        return await execute(self, query, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counting)
    node = GraphNode(row_id, True)
    _stack, row, _reports = await store.load_for_check(stack_id, node, "t")
    assert row is not None
    claimed = await store.update_resource(
        row_id,
        key,
        {"engine_id": "e", "status": Status.IN_PROGRESS},
        events=[NewEvent("a", "T", "CREATE", "IN_PROGRESS", "started")],
        stack_id=stack_id,
        current=row,
    )
    assert claimed is not None
    stored, ready, _current, *_ = await store.finish_node(
        stack_id,
        "t",
        node,
        resource_id=row_id,
        expected_key=claimed.atomic_key,
        changes={"status": Status.COMPLETE, "engine_id": None},
        events=[NewEvent("a", "T", "CREATE", "COMPLETE", "done")],
        reports={STACK_NODE: {}},
        expected_counts={STACK_NODE: 1},
    )
    assert stored and ready == [STACK_NODE]
    assert sum(sent.values()) == 3, sent  # no BEGIN, COMMIT, ping or separate read
    assert [e.reason for e in await store.list_events(stack_id)] == ["started", "done"]


async def test_a_connection_the_server_dropped_is_replaced(
    store: SqlStore, postgres_url: str
) -> None:
    """After a server restart (here: its backends terminated) a read is tried again on a
    new connection; a write fails with a StoreError (it may have committed), the next works."""
    stack_id, row_id, key = await _stack_with_row(store)
    await store.get_stack(stack_id)  # a connection is now held
    assert await asyncio.to_thread(_terminate_others, postgres_url) >= 1
    assert (await store.get_stack(stack_id)).id == stack_id

    await asyncio.to_thread(_terminate_others, postgres_url)
    with pytest.raises(StoreError, match="database error"):
        await store.update_resource(row_id, key, {"status_reason": "x"})
    written = await store.update_resource(row_id, key, {"status_reason": "y"})
    assert written is not None and written.status_reason == "y"


async def test_statements_beyond_the_pool_wait_for_a_connection(
    store: SqlStore, postgres_url: str
) -> None:
    stack_id, _row_id, _key = await _stack_with_row(store)
    assert store._pg is not None
    size = store._pg._size

    async def slow() -> None:
        await store._pg._one("SELECT pg_sleep(0.2)", {})  # type: ignore[union-attr]

    async def watch() -> int:
        await asyncio.sleep(0.1)
        return await asyncio.to_thread(_backends, postgres_url)

    *_, seen = await asyncio.gather(*(slow() for _ in range(size * 2)), watch())
    # the hot path's connections, plus what SQLAlchemy's pool keeps for the other calls
    assert seen <= size + 2
    assert (await store.get_stack(stack_id)).id == stack_id


async def test_closing_waits_for_a_statement_in_flight(postgres_url: str) -> None:
    store = SqlStore.open(postgres_url)
    assert store._pg is not None
    running = asyncio.ensure_future(store._pg._one("SELECT pg_sleep(0.3)", {}))
    await asyncio.sleep(0.1)
    await store.close()
    assert running.done() and running.exception() is None
    gc.collect()  # an unclosed connection would warn here, failing the test


def test_a_store_used_from_several_event_loops(postgres_url: str) -> None:
    """A CLI command runs more than one loop over one store: each loop gets its own
    connections, and the ended loop's are closed, not leaked."""
    store = SqlStore.open(postgres_url)

    async def create() -> str:
        stack_id, _row, _key = await _stack_with_row(store)
        return stack_id

    stack_id = asyncio.run(create())

    async def read_and_close() -> str:
        try:
            return (await store.get_stack(stack_id)).name
        finally:
            await store.close()

    assert asyncio.run(read_and_close()) == "s"
    gc.collect()


async def test_a_waiter_cancelled_after_its_turn_came_passes_it_on(postgres_url: str) -> None:
    """All connections busy, two callers waiting: the first is woken and cancelled
    before it runs; the second still gets the connection given back."""
    store = SqlStore.open(postgres_url)
    assert store._pg is not None
    store._pg._size = 1
    try:
        async with store._pg._pool().connection():  # the only one, held here
            first = asyncio.ensure_future(store._pg._one("SELECT 1", {}))
            second = asyncio.ensure_future(store._pg._one("SELECT 2", {}))
            await asyncio.sleep(0.05)
        # Given back (which woke ``first``) and, before ``first`` could run, cancelled.
        first.cancel()
        assert await asyncio.wait_for(second, 5) == (2,)
        assert first.cancelled()
    finally:
        await store.close()


async def test_a_waiter_cancelled_before_its_turn_is_skipped(postgres_url: str) -> None:
    """A caller cancelled while waiting stays in the queue (no scan of thousands of
    waiters to take it out): its turn goes to the next caller, who is served in order."""
    store = SqlStore.open(postgres_url)
    assert store._pg is not None
    store._pg._size = 1
    try:
        async with store._pg._pool().connection():
            callers = [asyncio.ensure_future(store._pg._one(f"SELECT {n}", {})) for n in range(4)]
            await asyncio.sleep(0.05)
            callers[0].cancel()
            callers[2].cancel()
            await asyncio.sleep(0)
        assert await asyncio.wait_for(callers[1], 5) == (1,)
        assert await asyncio.wait_for(callers[3], 5) == (3,)
        assert callers[0].cancelled() and callers[2].cancelled()
    finally:
        await store.close()


async def test_a_connection_idle_for_long_is_checked_before_a_write(
    store: SqlStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idle past the limit, a connection is pinged first: a write after the server
    dropped it goes to a new connection instead of failing."""
    from converge.adapters.sql import postgres_pool

    stack_id, row_id, key = await _stack_with_row(store)
    await store.get_stack(stack_id)
    monkeypatch.setattr(postgres_pool, "IDLE_PING_SECONDS", 0.0)
    await asyncio.to_thread(_terminate_others, postgres_url)
    written = await store.update_resource(row_id, key, {"status_reason": "after"})
    assert written is not None and written.status_reason == "after"


async def test_a_read_rides_out_its_connection_dropped_mid_statement(
    store: SqlStore, postgres_url: str
) -> None:
    """A reader (``converge apply`` following an operation) whose connection the server
    drops in the middle of a statement gets its answer from a fresh connection, not an
    error: a read wrote nothing, so running it again is safe."""
    stack_id, _, _ = await _stack_with_row(store)
    name = postgres_url.rsplit("/", 1)[1]
    with psycopg.connect(postgres_url) as locker, psycopg.connect(postgres_url) as admin:
        locker.execute("LOCK TABLE event IN ACCESS EXCLUSIVE MODE")  # the read waits on it
        reading = asyncio.create_task(store.list_events(stack_id))
        waiting: tuple[int] | None = None
        for _ in range(200):
            waiting = admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND wait_event_type = "
                "'Lock' AND pid <> pg_backend_pid()",
                (name,),
            ).fetchone()
            if waiting is not None:
                break
            await asyncio.sleep(0.02)
        assert waiting is not None, "the read never waited on the lock"
        admin.execute("SELECT pg_terminate_backend(%s)", waiting)
        await asyncio.sleep(0.1)
        locker.rollback()  # the lock goes: the read tried again finds the table free
        events = await asyncio.wait_for(reading, 10)
    assert isinstance(events, list)


async def _stack_with_rows(store: SqlStore, count: int) -> tuple[str, list[int]]:
    stack_id, rows = await stack_with_rows(store, named(count), name="many")
    return stack_id, [row.id for row in rows]


async def test_reads_of_checks_started_together_are_one_statement(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks of a work message (one stack and traversal) read in one statement; a
    read of another traversal in its own; a lone read (a chain) in the statement it had."""
    stack_id, ids = await _stack_with_rows(store, 32)
    await store.get_stack(stack_id)  # a connection is now held
    sent: list[str] = []
    execute = psycopg.AsyncCursor.execute

    async def counting(
        self: psycopg.AsyncCursor[object], query: str, *args: object, **kwargs: object
    ) -> object:
        sent.append(query)
        return await execute(self, query, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counting)
    loaded = await asyncio.gather(
        *(store.load_for_check(stack_id, GraphNode(rid, True), "t") for rid in ids),
        store.load_for_check(stack_id, GraphNode(ids[0], True), "other"),
    )
    assert [row.id if row else None for _stack, row, _reports in loaded] == [*ids, ids[0]]
    assert len(sent) == 2, sent
    sent.clear()
    _stack, row, _reports = await store.load_for_check(stack_id, GraphNode(ids[3], True), "t")
    assert row is not None and row.id == ids[3]
    assert len(sent) == 1 and "ANY" not in sent[0]


async def test_reads_together_are_tried_again_on_a_lost_connection(
    store: SqlStore, postgres_url: str
) -> None:
    stack_id, ids = await _stack_with_rows(store, 8)
    await store.get_stack(stack_id)  # a connection is now held
    assert await asyncio.to_thread(_terminate_others, postgres_url) >= 1
    loaded = await asyncio.gather(
        *(store.load_for_check(stack_id, GraphNode(rid, True), "t") for rid in ids)
    )
    assert [row.id if row else None for _stack, row, _reports in loaded] == ids
