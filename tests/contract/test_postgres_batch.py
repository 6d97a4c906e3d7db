"""Hot statements sent in batches (``postgres_batch``): many checks share one round trip
and one commit, and each statement keeps its own outcome.

The store contract (``test_store.py``, ``test_store_races.py``) runs on this path too;
here: concurrency inside one store (one batcher), a failing statement among others, a
batch that deadlocks, and the order statements are sent in.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from converge.adapters.sql import postgres_batch
from converge.adapters.sql.store import SqlStore
from converge.core.traversal import FAN_IN_PART, GraphNode
from converge.records import NewEvent, ResourceRecord
from support.store_rows import fan_in_of, finish_into_fan_in, named, stack_with_rows

CHECKS = 200


@pytest.fixture
async def store(postgres_url: str) -> AsyncIterator[SqlStore]:
    opened = SqlStore.open(postgres_url)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch sent together (a statement alone is not counted)."""
    sizes: list[int] = []
    together = postgres_batch._together

    async def counting(conn: Any, batch: list[Any]) -> Any:
        sizes.append(len(batch))
        return await together(conn, batch)

    monkeypatch.setattr(postgres_batch, "_together", counting)
    return sizes


async def _stack_with_rows(store: SqlStore, count: int) -> tuple[str, list[Any]]:
    return await stack_with_rows(store, named(count))


async def test_concurrent_claims_of_one_row_in_one_process_win_once(
    store: SqlStore, batches: list[int]
) -> None:
    """Claims racing inside one batch see each other's writes: the first wins, the rest
    find the key changed, as they would one after the other."""
    _stack_id, (row,) = await _stack_with_rows(store, 1)
    for round_ in range(5):
        results = await asyncio.gather(
            *(
                store.update_resource(row.id, row.atomic_key, {"engine_id": f"e{round_}-{i}"})
                for i in range(CHECKS // 5)
            )
        )
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, f"round {round_}: {len(winners)} claims won"
        row = await store.get_resource(row.id)
        assert row is not None and row.engine_id == winners[0].engine_id
    assert batches and max(batches) > 1  # they did share batches


async def test_many_checks_each_claim_and_finish_once(store: SqlStore, batches: list[int]) -> None:
    """Claims and finishes of many rows at once, all to one sync point that waits for all
    of them: every claim wins, every finish is stored, the sync point fires once."""
    stack_id, rows = await _stack_with_rows(store, CHECKS)
    target = GraphNode(10**6, True)

    async def check(row: Any) -> list[GraphNode]:
        claimed = await store.update_resource(row.id, row.atomic_key, {"engine_id": "e"})
        assert claimed is not None
        stored, ready, _current, *_ = await store.finish_node(
            stack_id,
            "t",
            GraphNode(row.id, True),
            resource_id=row.id,
            expected_key=claimed.atomic_key,
            changes={"engine_id": None, "status_reason": "done"},
            reports={target: {"from": row.id}},
            expected_counts={target: CHECKS},
        )
        assert stored
        return ready

    results = await asyncio.gather(*(check(row) for row in rows))
    assert [ready for ready in results if ready] == [[target]]
    assert await store.count_reports("t", target) == CHECKS
    after = await store.list_resources(stack_id)
    assert {(r.engine_id, r.status_reason) for r in after} == {(None, "done")}
    assert sum(batches) > len(batches)  # fewer round trips than statements


@pytest.fixture
def joins(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many statements every joined statement was made of."""
    sizes: list[int] = []
    join = postgres_batch._join

    def counting(statements: list[Any]) -> Any:
        sizes.append(len(statements))
        return join(statements)

    monkeypatch.setattr(postgres_batch, "_join", counting)
    return sizes


async def _claim(store: SqlStore, row: Any, key: int, engine: str) -> Any:
    """A check's claim: the row as read given (its result is merged, not read back)."""
    return await store.update_resource(
        row.id,
        key,
        {"engine_id": engine, "status_reason": "claimed"},
        events=[NewEvent(row.name, "T", "CREATE", "IN_PROGRESS", f"by {engine}", None)],
        stack_id=row.stack_id,
        current=row,
    )


async def test_claims_of_many_rows_go_as_one_statement_each_with_its_own_outcome(
    store: SqlStore, joins: list[int]
) -> None:
    """Claims of many rows at once are joined into one statement per batch; each keeps
    its own compare-and-swap (a stale key loses, one row claimed twice is won once) and
    its events are stored only when it won."""
    stack_id, rows = await _stack_with_rows(store, CHECKS)
    stale = {row.id for row in rows[::7]}
    twice = [row for row in rows[1::10] if row.id not in stale]
    claims = [
        _claim(store, row, row.atomic_key - 1 if row.id in stale else row.atomic_key, "e1")
        for row in rows
    ] + [_claim(store, row, row.atomic_key, "e2") for row in twice]
    results = await asyncio.gather(*claims)
    assert joins and max(joins) > 1  # joined
    won = [row for row in results if row is not None]
    by_id = {row.id: row for row in won}
    assert set(by_id) == {row.id for row in rows} - stale
    assert len(won) == len(by_id)  # a row claimed twice was won once
    after = {row.id: row for row in await store.list_resources(stack_id)}
    for row in rows:
        if row.id in stale:
            assert after[row.id] == row  # untouched
        else:
            assert after[row.id] == by_id[row.id]  # as the winner was told
            assert after[row.id].atomic_key == row.atomic_key + 1
    events = await store.list_events(stack_id)
    assert sorted((e.resource_name, e.reason) for e in events) == sorted(
        (row.name, f"by {row.engine_id}") for row in won
    )


async def test_finishes_into_one_group_of_a_big_fan_in_go_as_one_statement(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finishes of many rows into a big fan-in: those of one group in a batch are one
    statement; every row is written once, and the target fires once."""
    kinds: list[Any] = []
    join = postgres_batch._join

    def recording(statements: list[Any]) -> Any:
        kinds.append((statements[0].joinable.kind[0], len(statements)))
        return join(statements)

    monkeypatch.setattr(postgres_batch, "_join", recording)
    stack_id, rows = await _stack_with_rows(store, CHECKS)
    target = GraphNode(10**6, True)
    graph = fan_in_of(target, rows)

    async def finish(row: Any) -> list[GraphNode]:
        stored, ready = await finish_into_fan_in(store, row, target, graph, FAN_IN_PART)
        assert stored
        return ready

    results = await asyncio.gather(*(finish(row) for row in rows))
    assert [ready for ready in results if ready] == [[target]]
    assert any(kind == "finish-joined" and size > 1 for kind, size in kinds)
    assert await store.count_reports("t", target) == CHECKS
    assert {r.status_reason for r in await store.list_resources(stack_id)} == {"done"}


async def test_a_joined_claim_that_fails_fails_alone(store: SqlStore, joins: list[int]) -> None:
    """One row's value is refused by the server: the joined statement wrote nothing, and
    each claim runs again alone; that one gets its error, the others are won."""
    assert store._pg is not None
    store._pg._size = 1  # before the first statement makes the pool
    stack_id, rows = await _stack_with_rows(store, 6)
    async with store._pg._pool().connection():  # the only connection, held: all queue
        claims = [
            asyncio.ensure_future(_claim(store, row, row.atomic_key, "e" * (40 if i == 2 else 1)))
            for i, row in enumerate(rows)
        ]
        await asyncio.sleep(0.05)
    results = await asyncio.gather(*claims, return_exceptions=True)
    assert joins == [6]
    assert isinstance(results[2], psycopg.errors.StringDataRightTruncation)
    assert all(r.engine_id == "e" for i, r in enumerate(results) if i != 2)
    after = {row.id: row for row in await store.list_resources(stack_id)}
    assert after[rows[2].id] == rows[2]
    assert len(await store.list_events(stack_id)) == 5


async def test_a_failing_statement_loses_none_of_the_others(store: SqlStore) -> None:
    """One statement of a batch fails: the batch rolled back, each statement runs again
    alone; the failing one gets its own error, the others their results, written once."""
    stack_id, rows = await _stack_with_rows(store, 6)
    assert store._pg is not None
    store._pg._size = 1
    pg = store._pg
    async with pg._pool().connection():  # the only connection, held: all of them queue
        claims = [
            asyncio.ensure_future(store.update_resource(row.id, row.atomic_key, {"engine_id": "e"}))
            for row in rows[:3]
        ]
        broken = asyncio.ensure_future(pg._one("SELECT 1 / 0 WHERE %(x)s::int = 1", {"x": 1}))
        claims += [
            asyncio.ensure_future(store.update_resource(row.id, row.atomic_key, {"engine_id": "e"}))
            for row in rows[3:]
        ]
        await asyncio.sleep(0.05)
    with pytest.raises(psycopg.errors.DivisionByZero):
        await broken
    claimed = await asyncio.gather(*claims)
    assert all(row is not None and row.engine_id == "e" for row in claimed)
    assert [row.atomic_key for row in claimed] == [row.atomic_key + 1 for row in rows]
    after = await store.list_resources(stack_id)
    assert all(row.engine_id == "e" for row in after)


async def test_a_statement_the_client_cannot_send_undoes_the_batch_sent_before_it(
    store: SqlStore,
) -> None:
    """A parameter psycopg cannot adapt fails in the client, after the statements before
    it were sent: they are rolled back, not committed by the Sync, and run again alone."""
    stack_id, rows = await _stack_with_rows(store, 4)
    assert store._pg is not None
    store._pg._size = 1
    pg = store._pg
    async with pg._pool().connection():
        claims = [
            asyncio.ensure_future(store.update_resource(row.id, row.atomic_key, {"engine_id": "e"}))
            for row in rows[:2]
        ]
        bad = asyncio.ensure_future(
            pg._one("SELECT %(x)s::text", {"x": object()}, order=rows[2].id)
        )
        claims += [
            asyncio.ensure_future(store.update_resource(row.id, row.atomic_key, {"engine_id": "e"}))
            for row in rows[2:]
        ]
        await asyncio.sleep(0.05)
    with pytest.raises(psycopg.ProgrammingError):
        await bad
    claimed = await asyncio.gather(*claims)
    # Won once each: a claim committed by the abandoned batch would have lost the re-run.
    assert [row.atomic_key for row in claimed] == [row.atomic_key + 1 for row in rows]
    assert all(row.engine_id == "e" for row in await store.list_resources(stack_id))


async def test_statements_go_in_resource_order_shared_rows_last_and_alone(
    store: SqlStore,
) -> None:
    """What a batch is made of: sorted by resource id, at most one statement on rows
    other checks lock too (sync points), last; the next such waits for the next batch."""
    assert store._pg is not None
    batcher = store._pg._batcher()
    loop = asyncio.get_running_loop()
    for order, shared in [(5, False), (9, True), (1, False), (7, True), (3, False)]:
        batcher._queue.append(
            postgres_batch._Statement("SELECT 1", {}, order, shared, loop.create_future())
        )
    first = batcher._take()
    assert [(s.order, s.shared) for s in first] == [(1, False), (3, False), (5, False), (9, True)]
    assert [(s.order, s.shared) for s in batcher._take()] == [(7, True)]
    for statement in first:
        statement.future.cancel()


async def test_batches_that_deadlock_are_run_again_one_by_one(postgres_url: str) -> None:
    """Two batches that lock two rows in opposite orders (which the batcher's order
    avoids, forced here): PostgreSQL aborts one, whose statements then run alone; every
    update is applied exactly once."""
    stores = [SqlStore.open(postgres_url) for _ in range(2)]
    try:
        _stack_id, rows = await _stack_with_rows(stores[0], 2)
        first, second = rows
        sql = (
            "UPDATE resource SET status_reason = coalesce(status_reason, '') || %(tag)s "
            "WHERE id = %(id)s"
        )

        async def batch(store: SqlStore, ids: list[int], tag: str) -> None:
            assert store._pg is not None
            pg = store._pg
            # A lock wait between the two updates makes the cycle certain.
            statements = [
                (sql, {"tag": tag, "id": ids[0]}),
                ("SELECT pg_sleep(0.3)", {}),
                (sql, {"tag": tag, "id": ids[1]}),
            ]
            async with pg._pool().connection() as conn:
                items = [
                    postgres_batch._Statement(
                        s, p, 0, False, asyncio.get_running_loop().create_future()
                    )
                    for s, p in statements
                ]
                assert await pg._batcher()._send(conn, items)
                for item in items:
                    await item.future

        await asyncio.gather(
            batch(stores[0], [first.id, second.id], "a"),
            batch(stores[1], [second.id, first.id], "b"),
        )
        after = {row.id: row.status_reason for row in await stores[0].list_resources(_stack_id)}
        for row in (first, second):
            added = (after[row.id] or "")[len(row.status_reason or "") :]
            assert sorted(added) == ["a", "b"], after
    finally:
        for store in stores:
            await store.close()


async def test_finishes_on_one_group_counter_share_a_batch(store: SqlStore) -> None:
    """Finishes that lock the same group counter of a big fan-in and nothing else shared
    go last together; one on another group, or on other shared rows, waits."""
    assert store._pg is not None
    batcher = store._pg._batcher()
    loop = asyncio.get_running_loop()
    group, other = (0, True, 3), (0, True, 4)
    queued: list[tuple[int, postgres_batch.SharedKey]] = [
        (8, group),
        (2, None),
        (6, other),
        (4, group),
        (9, True),
        (1, group),
    ]
    for order, shared in queued:
        batcher._queue.append(
            postgres_batch._Statement("SELECT 1", {}, order, shared, loop.create_future())
        )
    first = batcher._take()
    assert [(s.order, s.shared) for s in first] == [(2, None), (1, group), (4, group), (8, group)]
    second = batcher._take()
    assert [(s.order, s.shared) for s in second] == [(6, other)]
    assert [(s.order, s.shared) for s in batcher._take()] == [(9, True)]
    for statement in first + second:
        statement.future.cancel()


async def test_finishes_each_on_one_counter_share_a_batch_in_counter_order(
    store: SqlStore,
) -> None:
    """Finishes that each lock one target's counter (a target waiting for a few reports)
    go last together, ordered by counter then row, so that every batch locks counters in
    one order; a group counter's, or one on several shared rows, waits for another."""
    assert store._pg is not None
    batcher = store._pg._batcher()
    loop = asyncio.get_running_loop()
    one = postgres_batch.OneCounter
    queued: list[tuple[int, postgres_batch.SharedKey]] = [
        (8, one((30, True))),
        (2, None),
        (6, (0, True, 4)),
        (4, one((10, True))),
        (9, True),
        (1, one((30, True))),
        (5, one((20, False))),
    ]
    for order, shared in queued:
        batcher._queue.append(
            postgres_batch._Statement("SELECT 1", {}, order, shared, loop.create_future())
        )
    first = batcher._take()
    assert [s.order for s in first] == [2, 4, 5, 1, 8]
    second = batcher._take()
    assert [(s.order, s.shared) for s in second] == [(6, (0, True, 4))]
    assert [(s.order, s.shared) for s in batcher._take()] == [(9, True)]
    for statement in first + second:
        statement.future.cancel()


async def test_finishes_into_targets_waiting_for_two_fire_each_once_across_processes(
    postgres_url: str,
) -> None:
    """Two processes finish the two predecessors of many targets at once (their finishes
    share batches, each on one counter): every target is made ready exactly once."""
    stores = [SqlStore.open(postgres_url) for _ in range(2)]
    try:
        stack_id, rows = await _stack_with_rows(stores[0], 60)
        pairs = [(rows[i], rows[i + 1], GraphNode(rows[i + 2].id, True)) for i in range(0, 60, 3)]

        async def finish(store: SqlStore, row: ResourceRecord, target: GraphNode) -> bool:
            finished = await store.finish_node(
                stack_id,
                "t",
                GraphNode(row.id, True),
                resource_id=row.id,
                expected_key=row.atomic_key,
                changes={"status_reason": "done"},
                reports={target: {"from": row.id}},
                expected_counts={target: 2},
            )
            assert finished.stored
            return target in finished.ready

        fired = await asyncio.gather(
            *(finish(stores[0], a, target) for a, _b, target in pairs),
            *(finish(stores[1], b, target) for _a, b, target in pairs),
        )
        count = len(pairs)
        assert [fired[i] + fired[count + i] for i in range(count)] == [1] * count
    finally:
        for store in stores:
            await store.close()


async def test_a_batch_gathers_its_group_from_deep_in_the_queue(store: SqlStore) -> None:
    """Finishes into a big fan-in arrive interleaved by group (the workers' messages
    split each group): a batch takes a full batch of its group from behind statements
    of other groups, which keep their place, instead of the few at the queue's head."""
    assert store._pg is not None
    batcher = store._pg._batcher()
    loop = asyncio.get_running_loop()
    groups = [(0, True, part) for part in range(4)]
    for order in range(4 * postgres_batch.MAX_BATCH):
        batcher._queue.append(
            postgres_batch._Statement(
                "SELECT 1", {}, order, groups[order % 4], loop.create_future()
            )
        )
    taken = [batcher._take() for _ in range(4)]
    assert [len(batch) for batch in taken] == [postgres_batch.MAX_BATCH] * 4
    assert [{s.shared for s in batch} for batch in taken] == [{group} for group in groups]
    assert not batcher._queue
    for batch in taken:
        for statement in batch:
            statement.future.cancel()


async def test_a_statement_on_an_idle_batcher_is_sent_by_its_caller(
    store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One check at a time (a chain): each claim is sent by the check itself, alone, no
    sender started; statements that come while one is out still queue for a sender, and
    every claim keeps its outcome either way."""
    senders: list[int] = []
    send_queued = postgres_batch.StatementBatcher._send_queued

    async def counting(self: Any) -> None:
        senders.append(len(self._queue))
        await send_queued(self)

    monkeypatch.setattr(postgres_batch.StatementBatcher, "_send_queued", counting)
    _stack_id, rows = await _stack_with_rows(store, 4)
    for row in rows[:2]:  # one after the other
        assert await _claim(store, row, row.atomic_key, "alone") is not None
    assert senders == []
    results = await asyncio.gather(  # together: the first goes itself, the rest queue
        *(_claim(store, row, row.atomic_key, "together") for row in rows[2:])
    )
    assert all(result is not None for result in results)
    assert senders == [1]
    stale = await _claim(store, rows[0], rows[0].atomic_key, "stale")
    assert stale is None  # the compare-and-swap holds on the caller's own path too
