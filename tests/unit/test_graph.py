"""DependencyGraph: orders respect every edge, cycles are real, big graphs are fast."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge.core.graph import CycleError, DependencyGraph


def graph(requirements: dict[str, list[str]]) -> DependencyGraph[str]:
    return DependencyGraph.from_requirements(requirements)


# --- Shape ---------------------------------------------------------------------------------


def test_requires_and_required_by_follow_the_edges() -> None:
    g = graph({"web": ["db", "net"], "db": ["net"], "net": []})
    assert g.nodes == ("web", "db", "net")
    assert g.requires("web") == ("db", "net")
    assert g.required_by("net") == ("web", "db")
    assert g.required_by("web") == ()
    assert g.leaves() == ("net",)
    assert g.roots() == ("web",)
    assert list(g.edges()) == [("web", "db"), ("web", "net"), ("db", "net")]
    assert len(g) == 3 and "db" in g and "nope" not in g


def test_repeated_requirements_count_once() -> None:
    g = graph({"a": ["b", "b"], "b": []})
    assert g.requires("a") == ("b",)
    assert g.edge_count() == 1


def test_requirement_of_unknown_node_is_a_value_error_naming_both() -> None:
    with pytest.raises(ValueError, match=r"requirement of 'a'.*'ghost'"):
        graph({"a": ["ghost"]})


def test_asking_about_an_unknown_node_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        graph({"a": []}).requires("b")


def test_non_string_keys_work() -> None:
    g = DependencyGraph.from_requirements({(1, True): [(2, True)], (2, True): []})
    assert g.topological_order() == [(2, True), (1, True)]


# --- Orders --------------------------------------------------------------------------------


def test_topological_order_puts_dependencies_first_and_ties_in_insertion_order() -> None:
    g = graph({"c": [], "a": ["c"], "b": [], "d": ["a", "b"]})
    # c and b are ready at once: c was inserted first; a becomes ready after c and precedes
    # b because it was inserted earlier.
    assert g.topological_order() == ["c", "a", "b", "d"]


def test_reverse_order_puts_dependents_first() -> None:
    g = graph({"net": [], "db": ["net"], "web": ["db"], "log": []})
    assert g.reverse_order() == ["web", "db", "net", "log"]


def test_order_raises_cycle_error_with_the_cycle() -> None:
    g = graph({"a": ["b"], "b": ["c"], "c": ["a"], "d": []})
    with pytest.raises(CycleError, match="a -> b -> c -> a") as info:
        g.topological_order()
    assert info.value.cycle == ["a", "b", "c"]
    with pytest.raises(CycleError):
        g.reverse_order()
    with pytest.raises(CycleError):
        g.levels()


def test_levels_group_by_longest_chain() -> None:
    g = graph({"a": [], "b": ["a"], "c": ["a", "b"], "d": []})
    assert g.levels() == [["a", "d"], ["b"], ["c"]]
    assert graph({}).levels() == []


# --- Cycles --------------------------------------------------------------------------------


def test_find_cycle_reports_edge_order_without_repeating_the_first() -> None:
    g = graph({"x": ["a"], "a": ["b"], "b": ["c"], "c": ["a"]})
    assert g.find_cycle() == ["a", "b", "c"]


def test_self_requirement_is_a_cycle_of_one() -> None:
    assert graph({"a": ["a"]}).find_cycle() == ["a"]


def test_acyclic_graph_has_no_cycle() -> None:
    g = graph({"a": ["b", "c"], "b": ["c"], "c": []})
    assert g.find_cycle() is None
    assert g.is_acyclic()


# --- Slices --------------------------------------------------------------------------------


def test_subgraph_keeps_edges_between_kept_nodes_only() -> None:
    g = graph({"a": ["b"], "b": ["c"], "c": []})
    sub = g.subgraph(["c", "a"])
    assert sub.nodes == ("a", "c")
    assert list(sub.edges()) == []
    assert list(g.subgraph(["b", "c"]).edges()) == [("b", "c")]
    with pytest.raises(ValueError, match="'z'"):
        g.subgraph(["z"])


def test_transitive_requirements_and_dependents() -> None:
    g = graph({"a": ["b"], "b": ["c"], "c": [], "d": ["c"]})
    assert g.all_requirements(["a"]) == {"b", "c"}
    assert g.all_dependents(["c"]) == {"a", "b", "d"}
    assert g.all_dependents(["a"]) == set()


# --- Scale ---------------------------------------------------------------------------------


def test_ten_thousand_deep_chain_needs_no_recursion() -> None:
    n = 10_000
    requirements = {i: [i + 1] if i + 1 < n else [] for i in range(n)}
    g = DependencyGraph.from_requirements(requirements)
    assert g.topological_order()[0] == n - 1
    assert g.find_cycle() is None
    assert len(g.levels()) == n
    looped = DependencyGraph.from_requirements({**requirements, n - 1: [0]})
    cycle = looped.find_cycle()
    assert cycle is not None and len(cycle) == n


def test_ten_thousand_nodes_are_ordered_without_recursion() -> None:
    # Speed is bench_engine's to measure (10,000-resource rows); here: a wide DAG of that
    # size is ordered correctly, both ways, with no recursion limit in the way.
    n = 10_000
    # Each node requires up to three earlier ones: a wide, realistic-looking DAG.
    requirements = {i: [j for j in (i - 1, i // 2, i - 7) if 0 <= j < i] for i in range(n)}
    g = DependencyGraph.from_requirements(requirements)
    position = {node: index for index, node in enumerate(g.topological_order())}
    assert len(position) == n
    assert all(position[j] < position[i] for i, reqs in requirements.items() for j in reqs)
    reverse = {node: index for index, node in enumerate(g.reverse_order())}
    assert all(reverse[j] > reverse[i] for i, reqs in requirements.items() for j in reqs)
    assert g.find_cycle() is None


# --- Properties ----------------------------------------------------------------------------

NODES = st.integers(min_value=0, max_value=14)


@st.composite
def requirement_maps(draw: st.DrawFn) -> dict[int, list[int]]:
    nodes = draw(st.lists(NODES, unique=True, max_size=12))
    return {node: draw(st.lists(st.sampled_from(nodes), max_size=4)) for node in nodes}


@given(requirement_maps())
def test_cycle_found_iff_no_topological_order(requirements: dict[int, list[int]]) -> None:
    g = DependencyGraph.from_requirements(requirements)
    cycle = g.find_cycle()
    try:
        order = g.topological_order()
    except CycleError as error:
        assert cycle is not None
        assert error.cycle == cycle
    else:
        assert cycle is None
        position = {node: i for i, node in enumerate(order)}
        assert sorted(order) == sorted(requirements)
        for node, dependency in g.edges():
            assert position[dependency] < position[node]
        reverse = {node: i for i, node in enumerate(g.reverse_order())}
        for node, dependency in g.edges():
            assert reverse[node] < reverse[dependency]


@given(requirement_maps())
def test_a_returned_cycle_is_a_real_cycle(requirements: dict[int, list[int]]) -> None:
    cycle = DependencyGraph.from_requirements(requirements).find_cycle()
    if cycle is not None:
        assert len(set(cycle)) == len(cycle)
        for i, node in enumerate(cycle):
            assert cycle[(i + 1) % len(cycle)] in requirements[node]


@given(requirement_maps())
def test_levels_respect_edges_when_acyclic(requirements: dict[int, list[int]]) -> None:
    g = DependencyGraph.from_requirements(requirements)
    if g.find_cycle() is not None:
        return
    level_of = {node: n for n, level in enumerate(g.levels()) for node in level}
    for node, dependency in g.edges():
        assert level_of[dependency] < level_of[node]
