"""A finish asked to read the successor it makes ready (``finish_node``'s ``load_next``):
what it gives back is what ``load_for_check`` reads right after, or nothing (SQLite); and
never for a successor that waits for other reports, was reported before, or whose row the
finish itself writes."""

from __future__ import annotations

from converge.adapters.sql.store import SqlStore
from converge.core.states import Action, Status
from converge.core.traversal import GraphNode
from converge.records import ClaimAhead, FinishedNode, NewEvent, NewResource, ResourceRecord
from support.store_rows import stack_with_rows

REPORT = {"name": "a", "reference_id": "phys-a", "attributes": {"x": [1, 2.5, None, "é"]}}


async def _two_resources(store: SqlStore) -> tuple[str, ResourceRecord, ResourceRecord]:
    new = [NewResource("a", "T"), NewResource("b", "T")]
    stack_id, (a, b) = await stack_with_rows(store, new, traversal="t1", in_progress=True)
    return stack_id, a, b


async def test_a_finish_reads_the_successor_as_a_load_right_after_would(
    store: SqlStore,
) -> None:
    stack_id, a, b = await _two_resources(store)
    successor = GraphNode(b.id, True)
    finished = await store.finish_node(
        stack_id,
        "t1",
        GraphNode(a.id, True),
        resource_id=a.id,
        expected_key=a.atomic_key,
        changes={"action": Action.CREATE, "status": Status.COMPLETE},
        events=[NewEvent("a", "T", "CREATE", "COMPLETE", "done", "phys-a")],
        reports={successor: REPORT},
        expected_counts={successor: 1},
        load_next=successor,
    )
    assert finished.stored and finished.ready == [successor]
    loaded = await store.load_for_check(stack_id, successor, "t1")
    assert [(r.sender_resource_id, r.data) for r in loaded.reports] == [(a.id, REPORT)]
    if store._pg is None:  # SQLite, or PostgreSQL through SQLAlchemy: read by the check
        assert finished.next_check in (None, loaded)
    else:
        assert finished.next_check == loaded


async def test_a_successor_with_another_predecessor_is_not_read_with_the_finish(
    store: SqlStore,
) -> None:
    """Even from the finish that makes it ready: its other reports are the check's to
    read, after the commit (the statement's snapshot could miss one)."""
    stack_id, a, b = await _two_resources(store)
    target = GraphNode(b.id, True)
    for sender in (GraphNode(a.id, True), GraphNode(777, True)):
        finished = await store.finish_node(
            stack_id,
            "t1",
            sender,
            resource_id=None,
            expected_key=None,
            changes=None,
            reports={target: {"from": sender.resource_id}},
            expected_counts={target: 2},
            load_next=target,
        )
        assert finished.next_check is None
    assert finished.ready == [target]


async def test_a_repeated_report_or_a_row_the_finish_writes_is_not_read_with_it(
    store: SqlStore,
) -> None:
    stack_id, a, b = await _two_resources(store)
    successor = GraphNode(b.id, True)
    args = {
        "resource_id": None,
        "expected_key": None,
        "changes": None,
        "reports": {successor: {"name": "a"}},
        "expected_counts": {successor: 1},
        "load_next": successor,
    }
    await store.finish_node(stack_id, "t1", GraphNode(a.id, True), **args)  # type: ignore[arg-type]
    # Delivered again: the report stored is the first one, which this finish did not write.
    again = await store.finish_node(stack_id, "t1", GraphNode(a.id, True), **args)  # type: ignore[arg-type]
    assert again.stored and again.ready == [successor] and again.next_check is None
    # The successor's row is the one the finish writes: the statement would read it as it
    # was before.
    cleanup = GraphNode(a.id, False)
    own = await store.finish_node(
        stack_id,
        "t1",
        GraphNode(a.id, True),
        resource_id=a.id,
        expected_key=a.atomic_key,
        changes={"status_reason": "written"},
        reports={cleanup: {}},
        expected_counts={cleanup: 1},
        load_next=cleanup,
    )
    assert own.stored and own.ready == [cleanup] and own.next_check is None


CLAIM = {
    "engine_id": "me",
    "action": Action.CREATE,
    "status": Status.IN_PROGRESS,
    "status_reason": "state changed",
    "properties_data": {"p": 1},
}


async def _finish_claiming(
    store: SqlStore,
    stack_id: str,
    a: ResourceRecord,
    b: ResourceRecord,
    *,
    a_key: int | None = None,
    b_key: int | None = None,
    traversal: str = "t1",
    read_ahead: GraphNode | None = None,
) -> FinishedNode:
    """a's finish, asked to claim b (with b's key, or ``b_key``)."""
    successor = GraphNode(b.id, True)
    return await store.finish_node(
        stack_id,
        traversal,
        GraphNode(a.id, True),
        resource_id=a.id,
        expected_key=a.atomic_key if a_key is None else a_key,
        changes={"status": Status.COMPLETE},
        reports={successor: REPORT},
        expected_counts={successor: 1},
        load_next=successor,
        claim_next=ClaimAhead(
            b.id,
            b.atomic_key if b_key is None else b_key,
            CLAIM,
            [NewEvent("b", "T", "CREATE", "IN_PROGRESS", "state changed", None)],
        ),
        read_ahead=read_ahead,
    )


async def _claim_events(store: SqlStore, stack_id: str) -> list[str]:
    return [e.state for e in await store.list_events(stack_id, resource_name="b")]


async def test_a_finish_claims_the_next_row_with_its_own_commit(store: SqlStore) -> None:
    """On PostgreSQL the finish claims b (its compare-and-swap and event) and gives back
    the row as claimed, b's row as it was before as ``next_check``, and the row read
    ahead; a store that does not claim ahead (SQLite) writes nothing of the claim."""
    new = [NewResource("a", "T"), NewResource("b", "T"), NewResource("c", "T")]
    stack_id, (a, b, c) = await stack_with_rows(store, new, traversal="t1", in_progress=True)
    finished = await _finish_claiming(store, stack_id, a, b, read_ahead=GraphNode(c.id, True))
    assert finished.stored and finished.ready == [GraphNode(b.id, True)]
    now = await store.get_resource(b.id)
    assert now is not None
    if store._pg is None:
        assert finished.claimed_next is None and finished.ahead is None
        assert now == b and await _claim_events(store, stack_id) == []
        return
    assert finished.claimed_next == now
    assert (now.engine_id, now.state, now.atomic_key) == (
        "me",
        "CREATE_IN_PROGRESS",
        b.atomic_key + 1,
    )
    assert now.properties_data == {"p": 1}
    assert finished.next_check is not None and finished.next_check.row == b  # before
    assert finished.ahead == c
    assert await _claim_events(store, stack_id) == ["CREATE_IN_PROGRESS"]


async def test_a_claim_ahead_is_made_only_with_its_finish_on_the_row_as_it_was_read(
    store: SqlStore,
) -> None:
    """No claim when b's row changed since it was read (the finish is still stored), when
    the finish itself loses its compare-and-swap (nothing written), or when the traversal
    is no longer the stack's current one."""
    new = [NewResource("a", "T"), NewResource("b", "T")]
    stack_id, (a, b) = await stack_with_rows(store, new, traversal="t1", in_progress=True)
    stale = await _finish_claiming(store, stack_id, a, b, b_key=b.atomic_key + 7)
    assert stale.stored and stale.claimed_next is None
    lost = await _finish_claiming(store, stack_id, a, b, a_key=a.atomic_key)  # a moved on
    assert not lost.stored and lost.claimed_next is None
    assert await store.get_resource(b.id) == b
    assert await _claim_events(store, stack_id) == []
    # Another stack, whose current traversal is t2: a finish for t1 does not claim.
    other, (a2, b2) = await stack_with_rows(store, new, name="o", traversal="t2", in_progress=True)
    superseded = await _finish_claiming(store, other, a2, b2, traversal="t1")
    assert superseded.stored and superseded.claimed_next is None
    assert await store.get_resource(b2.id) == b2
