"""Stacks, with resource rows or without, as the store contract tests start from."""

from __future__ import annotations

from collections.abc import Sequence

from converge.core.states import Action, Status
from converge.core.traversal import GraphNode, TraversalGraph
from converge.ports import Store
from converge.records import NewEvent, NewResource, ResourceRecord


async def new_stack(store: Store, name: str = "s") -> str:
    """A new stack named ``name`` in project p, with no template; its id."""
    stack = await store.create_stack(
        name,
        "p",
        action=Action.CREATE,
        disable_rollback=False,
        timeout_mins=None,
        drift_policy="notify",
    )
    return stack.id


async def stack_with_rows(
    store: Store,
    new: Sequence[NewResource],
    *,
    name: str = "s",
    traversal: str = "t",
    in_progress: bool = False,
) -> tuple[str, list[ResourceRecord]]:
    """A new stack with rows ``new``, pointed at ``traversal`` (and IN_PROGRESS when
    asked); its id and its rows in the order of their ids."""
    stack = await store.get_stack(await new_stack(store, name))
    changes: dict[str, object] = {"current_traversal": traversal}
    if in_progress:
        changes["status"] = Status.IN_PROGRESS
    started = await store.start_traversal(stack.id, stack.atomic_key, new, lambda _: (changes, {}))
    assert started is not None
    rows = await store.list_resources(stack.id)
    return stack.id, sorted(rows, key=lambda row: row.id)


def named(count: int) -> list[NewResource]:
    """``count`` new rows of type T: r0, r1, …"""
    return [NewResource(f"r{i}", "T") for i in range(count)]


def fan_in_of(target: GraphNode, rows: Sequence[ResourceRecord]) -> TraversalGraph:
    """A graph where ``target`` waits for every row's update node."""
    graph = TraversalGraph()
    for row in rows:
        graph.add_edge(target, GraphNode(row.id, True))
    return graph


async def finish_into_fan_in(
    store: Store,
    row: ResourceRecord,
    target: GraphNode,
    graph: TraversalGraph,
    part_size: int,
) -> tuple[bool, list[GraphNode]]:
    """``row``'s finish (its compare-and-swap, an event, its report) into ``target``, a
    big fan-in of ``graph`` counted in groups of ``part_size``: (stored, targets ready)."""
    node = GraphNode(row.id, True)
    part = graph.fan_in_part(target, node, part_size)
    assert part is not None
    stored, ready, _current, *_ = await store.finish_node(
        row.stack_id,
        "t",
        node,
        resource_id=row.id,
        expected_key=row.atomic_key,
        changes={"status_reason": "done"},
        events=[NewEvent(row.name, "T", "CREATE", "COMPLETE", "done", None)],
        reports={target: {"sender": row.id}},
        expected_counts={target: len(graph.predecessors_of(target))},
        fan_in={target: part},
    )
    return stored, ready
