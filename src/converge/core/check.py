"""CHECK as a traversal: its graph, what each node reports, and the stack's verdict.

A check observes every current resource and changes nothing real, so its graph has one
update node per resource and no edges: every node is a leaf and reports straight to the
stack's sync point, carrying what it found. (Heat walks a check in dependency order, but
observing one resource needs nothing from another, and Heat aggregates the failures
rather than stopping at the first, so the order changes no outcome.) The stack's verdict
is read from those reports when the last one arrives, in whichever process that is.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from converge.core.drift import DriftStatus
from converge.core.states import Status
from converge.core.traversal import GraphNode, TraversalGraph

COMPLETED = "Stack CHECK completed successfully"


def check_graph(resource_ids: Iterable[int]) -> TraversalGraph:
    """One independent node per resource row to observe."""
    graph = TraversalGraph()
    for resource_id in sorted(resource_ids):
        graph.add_node(GraphNode(resource_id, True))
    return graph


@dataclass(frozen=True)
class CheckReport:
    """What checking one resource found, as its node reports it to the stack.

    ``failure``: why the resource's check failed (None: it did not); ``nested``: for a
    resource owning a nested stack, whether that stack's check completed and its reason.
    """

    name: str
    drift: DriftStatus
    failure: str | None = None
    nested: tuple[bool, str] | None = None

    def to_payload(self) -> dict[str, Any]:
        payload: dict[str, Any] = {"name": self.name, "drift": str(self.drift)}
        if self.failure is not None:
            payload["failure"] = self.failure
        if self.nested is not None:
            payload["nested"] = [self.nested[0], self.nested[1]]
        return payload

    @staticmethod
    def from_payload(data: Mapping[str, Any]) -> CheckReport:
        nested = data.get("nested")
        return CheckReport(
            name=str(data["name"]),
            drift=DriftStatus(data["drift"]),
            failure=data.get("failure"),
            nested=None if nested is None else (bool(nested[0]), str(nested[1])),
        )


def verdict(reports: Iterable[CheckReport]) -> tuple[Status, str]:
    """The stack's status and reason once every resource has been checked (Heat's
    "Resource CHECK failed: …" when any failed)."""
    ordered = sorted(reports, key=lambda report: report.name)
    failures = [report.failure for report in ordered if report.failure is not None]
    failures += [
        f"{report.name}: {report.nested[1]}"
        for report in ordered
        if report.nested is not None and not report.nested[0]
    ]
    if failures:
        return Status.FAILED, "Resource CHECK failed: " + "; ".join(sorted(failures))
    counts = Counter(report.drift for report in ordered)
    summary = ", ".join(
        f"{counts[status]} {str(status).lower().replace('_', ' ')}"
        for status in DriftStatus
        if counts[status]
    )
    reason = f"{COMPLETED} ({summary or 'no resources'})"
    nested = [f"{report.name}: {report.nested[1]}" for report in ordered if report.nested]
    if nested:
        reason += "; " + "; ".join(nested)
    return Status.COMPLETE, reason
