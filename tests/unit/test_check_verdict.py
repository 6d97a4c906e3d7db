"""A CHECK traversal's graph, its nodes' reports and the stack's verdict (pure)."""

from __future__ import annotations

from converge.core.check import CheckReport, check_graph, verdict
from converge.core.drift import DriftStatus
from converge.core.states import Status
from converge.core.traversal import STACK_NODE, GraphNode


def test_every_resource_is_an_independent_node_reporting_to_the_stack() -> None:
    graph = check_graph([3, 1, 2])
    nodes = [GraphNode(i, True) for i in (1, 2, 3)]
    assert graph.leaves() == nodes
    assert graph.sinks() == nodes
    assert graph.predecessors_of(STACK_NODE) == frozenset(nodes)


def test_a_report_survives_its_payload() -> None:
    for report in (
        CheckReport("a", DriftStatus.IN_SYNC),
        CheckReport("b", DriftStatus.NOT_CHECKED, "b: Can not check b, resource not created yet"),
        CheckReport("c", DriftStatus.MODIFIED, nested=(False, "nested Resource CHECK failed")),
    ):
        assert CheckReport.from_payload(report.to_payload()) == report


def test_the_verdict_counts_drift_or_lists_every_failure() -> None:
    assert verdict([]) == (Status.COMPLETE, "Stack CHECK completed successfully (no resources)")
    fine = [
        CheckReport("b", DriftStatus.MODIFIED),
        CheckReport("a", DriftStatus.IN_SYNC),
        CheckReport("n", DriftStatus.IN_SYNC, nested=(True, "nested (1 in sync)")),
    ]
    assert verdict(fine) == (
        Status.COMPLETE,
        "Stack CHECK completed successfully (2 in sync, 1 modified); n: nested (1 in sync)",
    )
    failed = [
        *fine,
        CheckReport("z", DriftStatus.NOT_CHECKED, "z: unknown resource type 'X'"),
        CheckReport("m", DriftStatus.IN_SYNC, nested=(False, "nested Resource CHECK failed: q")),
    ]
    assert verdict(failed) == (
        Status.FAILED,
        "Resource CHECK failed: m: nested Resource CHECK failed: q; z: unknown resource type 'X'",
    )
