"""A finish asked to read the successor it makes ready (``finish_node``'s ``load_next``):
what it gives back is what ``load_for_check`` reads right after, or nothing (SQLite); and
never for a successor that waits for other reports, was reported before, or whose row the
finish itself writes."""

from __future__ import annotations

from converge.adapters.sql.store import SqlStore
from converge.core.states import Action, Status
from converge.core.traversal import GraphNode
from converge.records import NewEvent, NewResource, ResourceRecord
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
