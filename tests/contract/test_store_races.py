"""The store contract under real concurrency, on SQLite and PostgreSQL.

Several stores over one database stand for several engine processes: each has its own
connections and threads, so their transactions truly overlap. Whatever the interleaving,
a sync point fires once, a claim is won once, and a change is published once.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from converge.adapters.sql.entities import EntityStore
from converge.adapters.sql.stacks import UNUSED_TEMPLATE_KEPT
from converge.adapters.sql.store import SqlStore
from converge.core.baseline import observation
from converge.core.traversal import GraphNode, TraversalGraph
from converge.messages import ChangeKind
from converge.records import ClaimAhead, NewResource, ResourceRecord, ServiceRecord
from support.store_rows import fan_in_of, finish_into_fan_in, named, new_stack, stack_with_rows

PROCESSES = 4
REPORTERS = 12
ROUNDS = 15


@pytest.fixture(params=["same", "mixed"])
async def stores(
    request: pytest.FixtureRequest, database_url: str
) -> AsyncIterator[list[SqlStore]]:
    """``mixed``: on PostgreSQL, every other store runs its checks through SQLAlchemy
    instead of its psycopg statements (processes of two versions during an upgrade): the
    two paths must race each other as safely as themselves."""
    if request.param == "mixed" and database_url.startswith("sqlite"):
        pytest.skip("SQLite has one path for these statements")
    opened = [SqlStore.open(database_url) for _ in range(PROCESSES)]
    if request.param == "mixed":
        for store in opened[1::2]:
            store._pg = None
    try:
        yield opened
    finally:
        for store in opened:
            await store.close()


async def test_racing_reporters_fire_a_sync_point_exactly_once(stores: list[SqlStore]) -> None:
    """Many predecessors finishing at the same moment: exactly one of them sees the sync
    point complete (READ COMMITTED counting let none of them see it)."""
    stack_id = await new_stack(stores[0])
    for round_ in range(ROUNDS):
        traversal = f"t{round_}"
        target = GraphNode(10_000 + round_, True)
        results = await asyncio.gather(
            *(
                stores[sender % PROCESSES].finish_node(
                    stack_id,
                    traversal,
                    GraphNode(sender, True),
                    resource_id=None,
                    expected_key=None,
                    changes=None,
                    reports={target: {"sender": sender}},
                    expected_counts={target: REPORTERS},
                )
                for sender in range(REPORTERS)
            )
        )
        fired = [ready for _stored, ready, *_ in results if ready]
        assert fired == [[target]], f"round {round_}: fired {len(fired)} times"
        assert await stores[0].count_reports(traversal, target) == REPORTERS


async def test_a_repeated_report_after_the_sync_point_fired_fires_it_again(
    stores: list[SqlStore],
) -> None:
    """A predecessor checked again (a re-delivered message) re-announces a complete sync
    point, so a lost trigger is recovered; before completion it does not fire it."""
    stack_id = await new_stack(stores[0])
    target = GraphNode(99, True)

    async def report(sender: int) -> list[GraphNode]:
        _stored, ready, _current, *_ = await stores[sender % PROCESSES].finish_node(
            stack_id,
            "t",
            GraphNode(sender, True),
            resource_id=None,
            expected_key=None,
            changes=None,
            reports={target: {}},
            expected_counts={target: 3},
        )
        return ready

    assert await report(0) == []
    assert await report(0) == []  # a duplicate is not a second predecessor
    assert await report(1) == []
    assert await report(2) == [target]
    assert await report(1) == [target]  # re-announced
    assert await stores[0].count_reports("t", target) == 3


async def test_one_sender_reporting_to_many_racing_sync_points(stores: list[SqlStore]) -> None:
    """Senders that each report to several shared targets, in different orders: every
    target fires exactly once and nobody deadlocks."""
    stack_id = await new_stack(stores[0])
    targets = [GraphNode(500 + i, True) for i in range(4)]
    for round_ in range(ROUNDS // 3):
        traversal = f"m{round_}"
        results = await asyncio.gather(
            *(
                stores[sender % PROCESSES].finish_node(
                    stack_id,
                    traversal,
                    GraphNode(sender, True),
                    resource_id=None,
                    expected_key=None,
                    changes=None,
                    # each sender lists the targets in its own order
                    reports={t: {} for t in (targets[sender % 4 :] + targets[: sender % 4])},
                    expected_counts=dict.fromkeys(targets, REPORTERS),
                )
                for sender in range(REPORTERS)
            )
        )
        fired = sorted(
            (node.resource_id for _s, ready, *_ in results for node in ready),
        )
        assert fired == [t.resource_id for t in targets], f"round {round_}"


FAN_IN = 300
FAN_IN_PART = 8  # small groups: 38 of them, the last one short


def _fan_in(target: GraphNode, senders: int) -> TraversalGraph:
    graph = TraversalGraph()
    for sender in range(senders):
        graph.add_edge(target, GraphNode(sender, True))
    return graph


@pytest.mark.parametrize("repeat", [False, True])
async def test_racing_reporters_fire_a_big_fan_in_exactly_once(
    stores: list[SqlStore], repeat: bool
) -> None:
    """Hundreds of predecessors of one target finishing at once, counted in groups: the
    target fires exactly once, whether some reports are delivered twice (racing their
    first delivery) or not; a repeated report after that re-announces it."""
    stack_id = await new_stack(stores[0])
    target = GraphNode(100_000, True)
    graph = _fan_in(target, FAN_IN)

    async def report(sender: int) -> list[GraphNode]:
        node = GraphNode(sender, True)
        part = graph.fan_in_part(target, node, FAN_IN_PART)
        assert part is not None
        _stored, ready, _current, *_ = await stores[sender % PROCESSES].finish_node(
            stack_id,
            "t",
            node,
            resource_id=None,
            expected_key=None,
            changes=None,
            reports={target: {"sender": sender}},
            expected_counts={target: FAN_IN},
            fan_in={target: part},
        )
        return ready

    senders = list(range(FAN_IN)) + (list(range(0, FAN_IN, 7)) if repeat else [])
    results = await asyncio.gather(*(report(sender) for sender in senders))
    # Exactly one first report completed it. A repeated report racing the last first one
    # may see it complete too: re-announcing is what a repeat does.
    firsts = [ready for ready in results[:FAN_IN] if ready]
    assert firsts == [[target]], f"fired {len(firsts)} times"
    assert all(ready in ([], [target]) for ready in results[FAN_IN:])
    assert await stores[0].count_reports("t", target) == FAN_IN
    assert await report(5) == [target]  # re-announced once complete


@pytest.mark.parametrize("repeat", [False, True])
async def test_racing_finishes_of_rows_fire_a_big_fan_in_exactly_once(
    stores: list[SqlStore], repeat: bool
) -> None:
    """The same with rows to write (each finish a compare-and-swap; on PostgreSQL the
    finishes of one group in a batch are one statement): each row is written once (a
    repeated delivery loses its compare-and-swap), its events and report stored once,
    and the target fires exactly once."""
    stack_id, rows = await stack_with_rows(stores[0], named(FAN_IN))
    target = GraphNode(100_000, True)
    graph = fan_in_of(target, rows)

    async def finish(row: ResourceRecord) -> tuple[bool, list[GraphNode]]:
        store = stores[row.id % PROCESSES]
        return await finish_into_fan_in(store, row, target, graph, FAN_IN_PART)

    deliveries = rows + (rows[::7] if repeat else [])
    results = await asyncio.gather(*(finish(row) for row in deliveries))
    assert sum(stored for stored, _ in results) == FAN_IN
    fired = [ready for _, ready in results if ready]
    assert fired == [[target]], f"fired {len(fired)} times"
    assert await stores[0].count_reports("t", target) == FAN_IN
    after = await stores[0].list_resources(stack_id)
    assert {(r.status_reason, r.atomic_key) for r in after} == {("done", rows[0].atomic_key + 1)}
    assert len(await stores[0].list_events(stack_id)) == FAN_IN


async def test_senders_reporting_to_two_big_fan_ins_and_a_small_one(
    stores: list[SqlStore],
) -> None:
    """Every sender reports to two big fan-ins (counted in groups) and one small sync
    point, listing them in its own order, all racing: the group rows are locked before
    any target's row in every statement, so nobody waits on another in a cycle, and each
    target fires exactly once."""
    stack_id = await new_stack(stores[0])
    big = [GraphNode(300_000, True), GraphNode(300_001, True)]
    small = GraphNode(300_002, True)
    senders = 4 * FAN_IN_PART + 3
    graph = TraversalGraph()
    for sender in range(senders):
        for target in (*big, small):
            graph.add_edge(target, GraphNode(sender, True))

    async def report(sender: int) -> list[GraphNode]:
        node = GraphNode(sender, True)
        targets = [*big, small]
        targets = targets[sender % 3 :] + targets[: sender % 3]
        parts = {t: graph.fan_in_part(t, node, FAN_IN_PART) for t in big}
        _stored, ready, _current, *_ = await stores[sender % PROCESSES].finish_node(
            stack_id,
            "t",
            node,
            resource_id=None,
            expected_key=None,
            changes=None,
            reports={t: {} for t in targets},
            expected_counts=dict.fromkeys(targets, senders),
            fan_in={t: part for t, part in parts.items() if part is not None},
            # small groups for the big ones; the small one waits on its one counter
        )
        return ready

    for round_ in range(3):
        results = await asyncio.gather(*(report(sender) for sender in range(senders)))
        fired = sorted(node.resource_id for ready in results for node in ready)
        assert fired == [300_000, 300_001, 300_002], f"round {round_}: {fired}"
        await stores[0].purge_stack_data(stack_id, [])


async def test_a_big_fan_in_does_not_fire_before_its_last_group(stores: list[SqlStore]) -> None:
    """Every group but one complete, and the last one but one report: not ready; the
    last report makes it ready, and the store kept the parts for its purge."""
    stack_id = await new_stack(stores[0])
    target = GraphNode(200_000, True)
    count = 3 * FAN_IN_PART + 2
    graph = _fan_in(target, count)

    async def report(sender: int) -> list[GraphNode]:
        node = GraphNode(sender, True)
        _stored, ready, _current, *_ = await stores[sender % PROCESSES].finish_node(
            stack_id,
            "t",
            node,
            resource_id=None,
            expected_key=None,
            changes=None,
            reports={target: {}},
            expected_counts={target: count},
            fan_in={target: graph.fan_in_part(target, node, FAN_IN_PART)},  # type: ignore[dict-item]
        )
        return ready

    order = [*range(1, count), 0]
    for sender in order[:-1]:
        assert await report(sender) == [], f"sender {sender}"
    assert await report(order[-1]) == [target]
    await stores[0].purge_stack_data(stack_id, [])
    with stores[0]._engine.connect() as conn:
        left = conn.execute(sa.text("SELECT count(*) FROM sync_part")).scalar_one()
    assert left == 0


async def test_racing_claimers_in_several_processes_win_once(stores: list[SqlStore]) -> None:
    stack_id = await new_stack(stores[0])
    stack = await stores[0].get_stack(stack_id)
    await stores[0].start_traversal(
        stack_id, stack.atomic_key, [NewResource("a", "T")], lambda rows: ({}, {})
    )
    (row,) = await stores[0].list_resources(stack_id)
    for round_ in range(ROUNDS):
        results = await asyncio.gather(
            *(
                stores[i % PROCESSES].update_resource(
                    row.id, row.atomic_key, {"engine_id": f"e{round_}-{i}"}
                )
                for i in range(REPORTERS)
            )
        )
        winners = [r for r in results if r is not None]
        assert len(winners) == 1, f"round {round_}: {len(winners)} claims won"
        row = await stores[1].get_resource(row.id)  # type: ignore[assignment]
        assert row is not None and row.engine_id == winners[0].engine_id


async def test_racing_samplers_of_one_entity_publish_each_change_once(
    stores: list[SqlStore],
) -> None:
    samplers = [EntityStore(store) for store in stores for _ in range(2)]
    published = []
    for step in range(1, ROUNDS + 1):
        seen = {"only": observation({"v": step // 2}, None)}
        results = await asyncio.gather(
            *(
                sampler.reconcile("T::One", seen, complete=True, observed_at=step, now=step)
                for sampler in samplers
            )
        )
        notes = [n for result in results for n in result]
        assert len(notes) <= 1, f"step {step}: {len(notes)} notifications"
        published.extend(notes)
    # v goes 0,1,1,2,2,...: the first sighting appears, each new value changes it once
    assert [n.kind for n in published][:1] == [ChangeKind.APPEARED]
    assert len(published) == ROUNDS // 2 + 1
    assert [n.seq for n in published] == list(range(1, len(published) + 1))


async def test_closing_lets_a_transaction_in_flight_end_first(postgres_url: str) -> None:
    """A check cancelled while its transaction runs on a store thread (an engine
    stopping): close() must not dispose the pool under it, or the connection it holds is
    dropped unclosed (psycopg reports that from its finalizer)."""
    store = SqlStore.open(postgres_url)
    started, finished = threading.Event(), threading.Event()

    def slow(conn: Connection) -> int:
        started.set()
        time.sleep(0.3)
        value = int(conn.execute(sa.text("SELECT 1")).scalar_one())
        finished.set()
        return value

    transaction = asyncio.ensure_future(store._run(store._in_tx, slow))
    await asyncio.to_thread(started.wait, 5)
    transaction.cancel()
    await store.close()
    assert finished.is_set()
    gc.collect()  # an unclosed connection would be reported here, failing the test


async def test_racing_takers_get_a_lease_exactly_once(stores: list[SqlStore]) -> None:
    """Every engine asks for the same free lease at once: one of them gets it."""
    for process in range(PROCESSES):
        await stores[0].register_service(
            ServiceRecord(f"e{process}", "h", process, ("engine",), 100.0, 100.0)
        )
    for round_ in range(ROUNDS):
        won = await asyncio.gather(
            *(
                stores[process].take_lease(
                    f"heal:{round_}", f"e{process}", now=100.0, ttl=None, live_after=50.0
                )
                for process in range(PROCESSES)
                for _ in range(3)
            )
        )
        assert won.count(True) in range(1, 4), f"round {round_}: {won}"
        holders = {f"e{p}" for p in range(PROCESSES) if any(won[p * 3 : p * 3 + 3])}
        assert len(holders) == 1, f"round {round_}: held by {holders}"


async def test_a_finish_sees_the_traversal_started_while_it_ran(
    stores: list[SqlStore], database_url: str
) -> None:
    """A newer traversal's check that finds a row still claimed leaves it to the claim's
    finish to hand the row on, so that finish must see the newer traversal. On PostgreSQL
    its statement read the stack in the snapshot it began with: a traversal committed just
    after was not seen, and its check of the row was left for the sweeper."""
    finishing_store, starting_store = stores[0], stores[1]
    stack_id, (row,) = await stack_with_rows(finishing_store, named(1), traversal="t1")
    engine = starting_store._engine
    with engine.connect() as starting:  # a traversal being started: not yet committed
        if engine.dialect.name == "postgresql":
            starting.execute(
                sa.text("SELECT atomic_key FROM stack WHERE id = :id FOR UPDATE"), {"id": stack_id}
            )
        starting.execute(
            sa.text("UPDATE stack SET current_traversal = 't2' WHERE id = :id"), {"id": stack_id}
        )
        finishing = asyncio.create_task(
            finishing_store.finish_node(
                stack_id,
                "t1",
                GraphNode(row.id, True),
                resource_id=row.id,
                expected_key=row.atomic_key,
                changes={"status_reason": "done"},
                events=[],
                reports={},
                expected_counts={},
            )
        )
        await asyncio.sleep(0.3)
        assert not finishing.done(), "the finish did not wait for the start"
        starting.commit()
    finished = await asyncio.wait_for(finishing, 10)
    assert finished.stored and finished.current_traversal == "t2"


async def test_a_purge_waits_for_an_operation_starting_with_an_old_template(
    stores: list[SqlStore],
) -> None:
    """An unused template past ``UNUSED_TEMPLATE_KEPT`` is dropped, unless an operation is
    starting with it at that moment: the purge waits for that start and then finds it in
    use. Had it read the stack without waiting, it would drop the template of the
    traversal just started (whose workers could then not load it)."""
    purging_store, starting_store = stores[0], stores[1]
    stack_id = await new_stack(purging_store)
    kept = await purging_store.add_template(stack_id, {"a": 0}, {}, {}, {})
    old = await purging_store.add_template(stack_id, {"a": 1}, {}, {}, {})
    later = purging_store._clock() + UNUSED_TEMPLATE_KEPT + 1
    purging_store._clock = lambda: later
    engine = starting_store._engine
    with engine.connect() as starting:  # an operation's start: not yet committed
        if engine.dialect.name == "postgresql":
            starting.execute(
                sa.text("SELECT atomic_key FROM stack WHERE id = :id FOR UPDATE"), {"id": stack_id}
            )
        starting.execute(
            sa.text("UPDATE stack SET raw_template_id = :t WHERE id = :id"),
            {"t": old, "id": stack_id},
        )
        purging = asyncio.create_task(purging_store.purge_stack_data(stack_id, [kept]))
        await asyncio.sleep(0.3)
        assert not purging.done(), "the purge did not wait for the start"
        starting.commit()
    await asyncio.wait_for(purging, 10)
    assert (await purging_store.get_template(old)).template == {"a": 1}
    assert (await purging_store.get_stack(stack_id)).raw_template_id == old


async def test_a_claim_made_ahead_and_a_claim_of_the_same_row_win_once(
    stores: list[SqlStore],
) -> None:
    """A finish that claims its successor ahead (``claim_next``) races another process's
    claim of that successor's row, both on the key they read: exactly one of them holds
    the row (a store that never claims ahead lets the plain claim win)."""
    new = [NewResource(f"r{i}", "T") for i in range(2 * ROUNDS)]
    stack_id, rows = await stack_with_rows(stores[0], new, traversal="t", in_progress=True)
    for round_ in range(ROUNDS):
        sender, successor = rows[2 * round_], rows[2 * round_ + 1]
        node = GraphNode(successor.id, True)
        claim = {"engine_id": "ahead", "action": "CREATE", "status": "IN_PROGRESS"}
        finishing = stores[round_ % PROCESSES].finish_node(
            stack_id,
            "t",
            GraphNode(sender.id, True),
            resource_id=sender.id,
            expected_key=sender.atomic_key,
            changes={"status_reason": "done"},
            reports={node: {"from": sender.id}},
            expected_counts={node: 1},
            load_next=node,
            claim_next=ClaimAhead(successor.id, successor.atomic_key, claim, []),
        )
        plain = stores[(round_ + 1) % PROCESSES].update_resource(
            successor.id, successor.atomic_key, {"engine_id": "plain"}
        )
        finished, claimed = await asyncio.gather(finishing, plain)
        won = [finished.claimed_next is not None, claimed is not None]
        assert finished.stored and won.count(True) == 1, (round_, won)
        row = await stores[0].get_resource(successor.id)
        assert row is not None
        assert row.engine_id == ("ahead" if won[0] else "plain")
        assert row.atomic_key == successor.atomic_key + 1
