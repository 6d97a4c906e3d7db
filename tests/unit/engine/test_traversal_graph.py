"""Traversal graphs: update order from the new template, delete order from the old one."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from converge.core.graph import DependencyGraph
from converge.core.traversal import (
    STACK_NODE,
    ExistingResource,
    GraphNode,
    TraversalGraph,
    build_traversal_graph,
    choose_rows,
)


def U(i: int) -> GraphNode:
    return GraphNode(i, True)


def C(i: int) -> GraphNode:
    return GraphNode(i, False)


def row(
    i: int,
    name: str,
    requires: frozenset[int] = frozenset(),
    replaces: int | None = None,
    template: int | None = 1,
) -> ExistingResource:
    return ExistingResource(i, name, frozenset(requires), replaces, template)


def test_create_orders_updates_by_requirements() -> None:
    graph = build_traversal_graph(
        {"a": [], "b": ["a"]}, {"a": 1, "b": 2}, [row(1, "a"), row(2, "b")]
    )
    assert graph.predecessors_of(U(2)) == {U(1)}
    assert graph.leaves() == [U(1)]
    # cleanup of a resource still in the template waits for its update
    assert U(1) in graph.predecessors_of(C(1))


def test_untouched_rows_of_a_create_have_no_cleanup_node() -> None:
    fresh = [
        ExistingResource(1, "a", frozenset(), None, None, untouched=True),
        ExistingResource(2, "b", frozenset(), None, None, untouched=True),
    ]
    graph = build_traversal_graph({"a": [], "b": ["a"]}, {"a": 1, "b": 2}, fresh)
    assert set(graph.nodes) == {U(1), U(2)}
    assert graph.predecessors_of(STACK_NODE) == {U(2)}


def test_untouched_rows_keep_cleanup_when_dropped_or_ordering_others() -> None:
    untouched_dropped = ExistingResource(1, "gone", frozenset(), None, None, untouched=True)
    untouched_replacement = ExistingResource(3, "a", frozenset(), 2, None, untouched=True)
    original = row(2, "a")
    graph = build_traversal_graph(
        {"a": []}, {"a": 3}, [untouched_dropped, original, untouched_replacement]
    )
    assert C(1) in graph  # not in the template: its row must still go
    # the original goes only after its (never created) replacement's cleanup
    assert C(3) in graph.predecessors_of(C(2))


def test_stack_predecessors_follow_added_edges() -> None:
    graph = TraversalGraph()
    graph.add_node(U(1))
    assert graph.predecessors_of(STACK_NODE) == {U(1)}
    graph.add_edge(U(2), U(1))
    assert graph.predecessors_of(STACK_NODE) == {U(2)}


def test_removed_resources_are_deleted_dependents_first() -> None:
    # old: web requires db; new template: empty (delete)
    existing = [row(1, "db"), row(2, "web", {1})]
    graph = build_traversal_graph({}, {}, existing)
    assert graph.predecessors_of(C(1)) == {C(2)}
    assert graph.leaves() == [C(2)]
    assert graph.sinks() == [C(1)]
    assert graph.predecessors_of(STACK_NODE) == {C(1)}


def test_replaced_row_goes_after_its_replacement() -> None:
    existing = [row(1, "a", template=1), row(3, "a", replaces=1, template=2)]
    graph = build_traversal_graph({"a": []}, {"a": 3}, existing)
    assert C(3) in graph.predecessors_of(C(1))
    assert U(3) in graph.predecessors_of(C(3))


def test_flipped_order_has_no_cycle() -> None:
    # old: a requires b; new: b requires a
    existing = [row(1, "a", {2}), row(2, "b")]
    graph = build_traversal_graph({"a": [], "b": ["a"]}, {"a": 1, "b": 2}, existing)
    deps = DependencyGraph.from_requirements({n: graph.predecessors_of(n) for n in graph.nodes})
    assert deps.find_cycle() is None
    order = deps.topological_order()
    assert order.index(U(1)) < order.index(U(2))  # update order from the new template
    assert order.index(C(1)) < order.index(C(2))  # delete order from the old one


def test_choose_rows_prefers_target_then_previous_then_newest() -> None:
    rows = [
        row(1, "a", template=1),
        row(2, "a", template=2),
        row(3, "b", template=None),
        row(4, "b", template=None),
    ]
    assert choose_rows(["a", "b", "c"], rows, 1, 2) == {"a": rows[0], "b": rows[3], "c": None}
    assert choose_rows(["a"], rows, 5, 2)["a"] == rows[1]


def test_graph_round_trips_through_json() -> None:
    graph = build_traversal_graph(
        {"a": [], "b": ["a"]}, {"a": 1, "b": 2}, [row(1, "a"), row(2, "b")]
    )
    again = TraversalGraph.decode(graph.encode())
    assert again.predecessors == graph.predecessors
    assert again.successors == graph.successors


@given(
    st.dictionaries(
        st.integers(1, 30),
        st.sets(st.integers(1, 30), max_size=4),
        max_size=30,
    ),
    st.sets(st.integers(1, 30), max_size=30),
)
def test_any_acyclic_template_gives_an_acyclic_traversal(
    old: dict[int, set[int]], new: set[int]
) -> None:
    # old relationships: only towards smaller ids (acyclic, as a validated template is)
    existing = [row(i, f"r{i}", {j for j in reqs if j < i and j in old}) for i, reqs in old.items()]
    names = sorted(new)
    requirements = {f"r{i}": [f"r{j}" for j in names if j < i and (i + j) % 3 == 0] for i in names}
    ids = {f"r{i}": (i if i in old else 100 + i) for i in names}
    graph = build_traversal_graph(requirements, ids, existing)
    deps = DependencyGraph.from_requirements({n: graph.predecessors_of(n) for n in graph.nodes})
    assert deps.find_cycle() is None
    for r in existing:
        if U(r.id) in graph:
            assert U(r.id) in graph.predecessors_of(C(r.id))


def test_the_hosts_of_bound_resources_travel_with_the_graph() -> None:
    graph = build_traversal_graph({"f": [], "n": ["f"]}, {"f": 1, "n": 2}, [])
    graph.pin_hosts({1: "alpha", 99: "not-in-this-graph"})
    assert graph.host_of(U(1)) == "alpha" and graph.host_of(C(1)) == "alpha"
    assert graph.host_of(U(2)) is None
    again = TraversalGraph.decode(graph.encode())
    assert again.hosts == {1: "alpha"}
    assert again.host_of(U(1)) == "alpha"
    # a graph with no bound resource is stored as before
    assert "hosts" not in build_traversal_graph({"n": []}, {"n": 2}, []).encode()


def test_a_big_fan_in_is_split_in_groups_of_sorted_predecessors() -> None:
    graph = TraversalGraph()
    for i in range(1, 11):
        graph.add_node(U(i))  # ten sinks: the stack waits for all of them
    assert graph.fan_in_part(STACK_NODE, U(3), size=10) is None  # small enough: one counter
    parts = [graph.fan_in_part(STACK_NODE, U(i), size=4) for i in range(1, 11)]
    assert parts[0] == (0, 4, 3) and parts[3] == (0, 4, 3)
    assert parts[4] == (1, 4, 3) and parts[7] == (1, 4, 3)
    assert parts[8] == (2, 2, 3) and parts[9] == (2, 2, 3)  # the last group is short
    assert graph.fan_in_part(STACK_NODE, U(99), size=4) is None  # not a predecessor
    graph.add_edge(U(11), U(10))  # U(10) is no longer a sink: groups are recomputed
    assert graph.fan_in_part(STACK_NODE, U(11), size=4) == (2, 2, 3)
