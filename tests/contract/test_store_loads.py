"""What the store reads for many checks at once, on every store: reads issued together
(coalesced into one statement on PostgreSQL, ``postgres_loads``) give what each read
alone gives, and ``start_traversal`` hands ``build`` the rows a read-back gives."""

from __future__ import annotations

import asyncio
from typing import Any

from contract.test_store import new_stack
from converge.adapters.sql.store import SqlStore
from converge.core.states import Action, Status
from converge.core.traversal import GraphNode
from converge.records import NewResource, ResourceRecord

MISSING = 10**6  # no row has this id


async def _stack_with_rows(store: SqlStore, name: str, count: int) -> tuple[str, list[int]]:
    stack_id = await new_stack(store, name)
    stack = await store.get_stack(stack_id)
    started = await store.start_traversal(
        stack_id,
        stack.atomic_key,
        [
            NewResource(f"r{i}", "T", requires=frozenset({i}) if i else frozenset())
            for i in range(count)
        ],
        lambda rows: ({"current_traversal": "t", "status": Status.IN_PROGRESS}, {}),
    )
    assert started is not None
    return stack_id, [row.id for row in await store.list_resources(stack_id)]


async def _report(
    store: SqlStore, stack_id: str, traversal: str, sender: int, targets: dict[GraphNode, Any]
) -> None:
    stored, _ready, _current, *_ = await store.finish_node(
        stack_id,
        traversal,
        GraphNode(sender, True),
        resource_id=None,
        expected_key=None,
        changes=None,
        reports=targets,
        expected_counts=dict.fromkeys(targets, 9),
    )
    assert stored


async def test_reads_issued_together_give_what_each_gives_alone(store: SqlStore) -> None:
    first, ids = await _stack_with_rows(store, "one", 40)
    second, other_ids = await _stack_with_rows(store, "two", 3)
    # Reports to several nodes of both phases, from several senders, in two traversals.
    await _report(store, first, "t", ids[0], {GraphNode(ids[1], True): {"n": [1]}})
    await _report(store, first, "t", ids[2], {GraphNode(ids[1], True): {"n": 2}})
    await _report(store, first, "t", ids[3], {GraphNode(ids[1], False): {"cleanup": True}})
    await _report(store, first, "u", ids[4], {GraphNode(ids[1], True): {"other": "traversal"}})
    await _report(store, first, "t", ids[5], {GraphNode(MISSING, True): {"to": "nobody"}})
    await _report(store, second, "t", other_ids[0], {GraphNode(other_ids[1], True): {"s": 2}})
    reads: list[tuple[str, GraphNode, str, bool]] = [
        (first, GraphNode(rid, True), "t", i % 3 != 0) for i, rid in enumerate(ids)
    ]
    reads += [
        (first, GraphNode(ids[1], False), "t", True),  # the same row, its other phase
        (first, GraphNode(ids[1], True), "t", True),  # the same node twice
        (first, GraphNode(MISSING, True), "t", True),  # no row: None
        (first, GraphNode(MISSING, True), "t", False),
        (first, GraphNode(ids[1], True), "u", True),  # another traversal
        (first, GraphNode(ids[6], True), "u", False),
        (second, GraphNode(other_ids[1], True), "t", True),  # another stack
        (second, GraphNode(other_ids[2], True), "t", False),
    ]
    alone = [
        await store.load_for_check(stack_id, node, traversal, with_reports=with_reports)
        for stack_id, node, traversal, with_reports in reads
    ]
    together = await asyncio.gather(
        *(
            store.load_for_check(stack_id, node, traversal, with_reports=with_reports)
            for stack_id, node, traversal, with_reports in reads
        )
    )
    assert list(together) == alone
    by_node = {
        (read[1], read[2], read[3]): loaded for read, loaded in zip(reads, alone, strict=True)
    }
    assert [r.data for r in by_node[GraphNode(ids[1], True), "t", True][2]] == [
        {"n": [1]},
        {"n": 2},
    ]
    missing = by_node[GraphNode(MISSING, True), "t", True]
    assert missing[1] is None and [r.data for r in missing[2]] == [{"to": "nobody"}]
    # Each read has its own values: changing one's does not change another's.
    twice = [i for i, read in enumerate(reads) if read[1:] == (GraphNode(ids[1], True), "t", True)]
    one, other = (together[i] for i in twice)
    one[2][0].data["n"].append(2)
    assert other[2][0].data == {"n": [1]}


async def test_start_traversal_gives_build_the_rows_a_read_back_gives(
    store: SqlStore,
) -> None:
    stack_id = await new_stack(store)
    seen: list[list[ResourceRecord]] = []

    def build(rows: list[ResourceRecord]) -> tuple[dict[str, Any], dict[str, Any]]:
        seen.append(list(rows))
        return {"current_traversal": f"t{len(seen)}", "status": Status.IN_PROGRESS}, {}

    for count in (3, 100):  # a few rows, and enough for PostgreSQL's COPY
        stack = await store.get_stack(stack_id)
        new = [
            NewResource(
                f"n{len(seen)}-{i}",
                "T",
                requires=frozenset({5, 2}) if i % 2 else frozenset(),
                replaces=1 if i == 1 else None,
                current_template_id=7 if i % 3 else None,
                deletion_policy="Retain" if i == 2 else "Delete",
                host="h" if i == 4 else None,
            )
            for i in range(count)
        ]
        started = await store.start_traversal(stack_id, stack.atomic_key, new, build)
        assert started is not None
        assert seen[-1] == await store.list_resources(stack_id)
    assert [len(rows) for rows in seen] == [3, 103]
    assert all(row.action == Action.INIT for row in seen[-1])


async def test_reads_issued_together_outlive_the_first_one_cancelled(store: SqlStore) -> None:
    stack_id, ids = await _stack_with_rows(store, "s", 10)
    reads = [
        asyncio.create_task(store.load_for_check(stack_id, GraphNode(rid, True), "t"))
        for rid in ids
    ]
    await asyncio.sleep(0)  # every read issued: on PostgreSQL, all wait for one statement
    reads[0].cancel()
    loaded = await asyncio.wait_for(asyncio.gather(*reads[1:]), 10)
    assert [row.id if row else None for _stack, row, _reports in loaded] == ids[1:]
    assert reads[0].done()  # cancelled, or done already (SQLite reads inline)
