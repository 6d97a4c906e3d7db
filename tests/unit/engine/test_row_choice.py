"""Which stored row stands for a name (Heat's suitability ranking) and when a traversal's
update phase is over."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from converge.core.traversal import (
    ExistingResource,
    GraphNode,
    build_traversal_graph,
    choose_rows,
    stands_for,
    update_phase_done,
)

V1, V2, V3 = 1, 2, 3


def row(i: int, template: int | None, **kw: object) -> ExistingResource:
    base = ExistingResource(i, "a", frozenset(), None, template, settled=True)
    return replace(base, **kw)  # type: ignore[arg-type]


def test_live_replacement_wins_over_the_original_of_the_previous_template() -> None:
    # v2 replaced a (cleanup pending); v3 supersedes while v1 is still "previous".
    original = row(1, V1, replaced_by=2)
    replacement = row(2, V2, replaces=1)
    assert choose_rows(["a"], [original, replacement], V3, V1)["a"] == replacement


def test_rollback_finds_the_original_of_its_target_template() -> None:
    original = row(1, V1, replaced_by=2)
    replacement = row(2, V2, replaces=1)
    assert choose_rows(["a"], [original, replacement], V1, V2)["a"] == original


def test_replacement_never_acted_on_is_dropped_for_its_original() -> None:
    original = row(1, V1, replaced_by=2)
    decided = row(2, None, replaces=1, untouched=True, settled=False)
    assert choose_rows(["a"], [original, decided], V3, V1)["a"] == original
    # with no previous template to tell them apart either
    assert choose_rows(["a"], [original, decided], V3, None)["a"] == original


def test_replacement_being_created_is_live() -> None:
    original = row(1, V1, replaced_by=2)
    creating = row(2, None, replaces=1, settled=False)
    assert choose_rows(["a"], [original, creating], V3, V1)["a"] == creating


def test_failed_rows_are_penalised_even_of_the_target_template() -> None:
    # Heat: a manual rollback after a failed replacement goes back to the healthy original.
    healthy = row(1, V1, replaced_by=2)
    failed = row(2, V2, replaces=1, failed=True)
    assert choose_rows(["a"], [healthy, failed], V3, V2)["a"] == healthy
    assert (
        choose_rows(["a"], [replace(healthy, current_template_id=V3), failed], V2, V3)["a"].id == 1
    )


def test_rows_being_deleted_lose_to_anything() -> None:
    deleting = row(1, V3, deleting=True)
    failed = row(2, None, failed=True)
    assert choose_rows(["a"], [deleting, failed], V3, None)["a"] == failed


def test_stands_for_follows_only_replacements_made_during_the_traversal() -> None:
    original = row(1, V1, replaced_by=2)
    made_now = row(2, V2, replaces=1)
    graph = build_traversal_graph({"a": []}, {"a": 1}, [original])
    rows = {1: original, 2: made_now}
    assert stands_for(1, rows, graph) == made_now
    # a replacement the graph knows (a dropped one, being cleaned up) does not stand for it
    graph = build_traversal_graph({"a": []}, {"a": 1}, [original, made_now])
    assert stands_for(1, rows, graph) == original


def test_update_phase_is_done_when_every_update_node_converged_to_the_template() -> None:
    a = ExistingResource(1, "a", frozenset(), None, V1, replaced_by=3, settled=True)
    b = ExistingResource(2, "b", frozenset({1}), None, V2, settled=True)
    a2 = ExistingResource(3, "a", frozenset(), 1, V2, settled=True)
    graph = build_traversal_graph({"a": [], "b": ["a"]}, {"a": 1, "b": 2}, [a, b])
    assert update_phase_done(graph, [a, b, a2], V2)
    assert not update_phase_done(graph, [a, b, replace(a2, settled=False)], V2)
    assert not update_phase_done(graph, [a, replace(b, current_template_id=V1), a2], V2)
    assert not update_phase_done(graph, [a, b], V2)  # a not replaced yet: still v1


ROWS = st.lists(
    st.builds(
        lambda template, replaced, failed, deleting, untouched: (
            template,
            replaced,
            failed,
            deleting,
            untouched,
        ),
        st.sampled_from([None, V1, V2, V3]),
        st.booleans(),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)


def _chain(spec: list[tuple[int | None, bool, bool, bool, bool]]) -> list[ExistingResource]:
    """Rows of one name, each optionally replaced by the next (a replacement chain)."""
    rows = []
    for index, (template, replaced, failed, deleting, untouched) in enumerate(spec, start=1):
        is_last = index == len(spec)
        rows.append(
            ExistingResource(
                index,
                "a",
                frozenset(),
                index - 1 if index > 1 else None,
                None if untouched else template,
                untouched=untouched and not (replaced and not is_last),
                replaced_by=index + 1 if replaced and not is_last else None,
                failed=failed and not untouched,
                deleting=deleting and not untouched,
            )
        )
    return rows


@given(ROWS, st.sampled_from([V1, V2, V3]), st.sampled_from([None, V1, V2, V3]))
def test_choice_invariants(spec: list, target: int, previous: int | None) -> None:  # type: ignore[type-arg]
    rows = _chain(spec)
    chosen = choose_rows(["a", "b"], rows, target, previous)
    assert chosen["b"] is None
    pick = chosen["a"]
    assert pick in rows
    healthy = [r for r in rows if not r.failed and not r.deleting]
    if healthy:
        # never a failed or deleting row while a healthy one exists
        assert pick in healthy
        if any(r.current_template_id == target for r in healthy):
            assert pick.current_template_id == target
        elif pick.replaced_by is not None:
            # a row is chosen over its replacement only when that one was never acted on
            # or is itself unhealthy
            by_id = {r.id: r for r in rows}
            successor = by_id[pick.replaced_by]
            assert successor.untouched or successor not in healthy
    # the choice does not depend on the order rows were read in
    assert choose_rows(["a"], list(reversed(rows)), target, previous)["a"] == pick


def test_graph_node_of_chosen_row_is_an_update_node() -> None:
    original = row(1, V1, replaced_by=2)
    replacement = row(2, V2, replaces=1)
    chosen = choose_rows(["a"], [original, replacement], V3, V1)
    graph = build_traversal_graph({"a": []}, {"a": chosen["a"].id}, [original, replacement])  # type: ignore[union-attr]
    assert GraphNode(2, True) in graph
    assert GraphNode(1, True) not in graph  # the original only gets cleaned up
    assert GraphNode(1, False) in graph
