"""The graph a traversal walks: update nodes in dependency order, cleanup nodes in reverse.

Built from the new template's requirements (by resource name) and the resources that exist
(by id, with the requirements recorded when they were last converged), following Heat's
convergence: the update of a resource waits for the updates of what it requires; the
cleanup of a resource waits for the cleanup of everything that required it (delete order
from the *old* relationships) and for its own update node (so an old resource goes only
after its replacement exists and dependents point at it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple


@dataclass(frozen=True, order=True)
class GraphNode:
    resource_id: int
    is_update: bool

    def encode(self) -> list[Any]:
        return [self.resource_id, self.is_update]

    @staticmethod
    def decode(data: Iterable[Any]) -> GraphNode:
        resource_id, is_update = data
        return GraphNode(int(resource_id), bool(is_update))

    def __str__(self) -> str:
        return f"{self.resource_id}:{'update' if self.is_update else 'cleanup'}"


# The stack's own sync point: every node nothing else waits for reports here.
STACK_NODE = GraphNode(0, True)


# Predecessors per part of a big fan-in's counter (see ``TraversalGraph.fan_in_part``).
FAN_IN_PART = 64


class FanInPart(NamedTuple):
    """Where a sender counts in a target with more than ``FAN_IN_PART`` predecessors:
    its group (``part``, of ``size`` predecessors) out of ``parts`` groups."""

    part: int
    size: int
    parts: int


@dataclass(frozen=True)
class ExistingResource:
    """A stored resource row, as graph building sees it."""

    id: int
    name: str
    requires: frozenset[int]
    replaces: int | None
    current_template_id: int | None
    # Never acted on (Heat's INIT): nothing real exists for it and no other row's order
    # refers to it.
    untouched: bool = False
    replaced_by: int | None = None
    failed: bool = False  # its last action failed
    deleting: bool = False  # its last action was a delete
    # Converged and reported: COMPLETE, not paused at a hook.
    settled: bool = False


@dataclass
class TraversalGraph:
    """Predecessors and successors of every node; immutable once stored for a traversal."""

    predecessors: dict[GraphNode, set[GraphNode]] = field(default_factory=dict)
    successors: dict[GraphNode, set[GraphNode]] = field(default_factory=dict)
    # The machine a resource's work must run on (resources bound to their host), by id.
    hosts: dict[int, str] = field(default_factory=dict)
    # The stack node's predecessors, computed once: every finished node asks for their
    # number, and recomputing them would make a traversal O(N²).
    _sinks: frozenset[GraphNode] | None = field(default=None, repr=False, compare=False)
    # Each big fan-in's predecessors by their place in sorted order, computed once per
    # target for the same reason.
    _places: dict[GraphNode, dict[GraphNode, int]] = field(
        default_factory=dict, repr=False, compare=False
    )

    def add_node(self, node: GraphNode) -> None:
        self._sinks = None
        self._places = {}
        self.predecessors.setdefault(node, set())
        self.successors.setdefault(node, set())

    def add_edge(self, node: GraphNode, requires: GraphNode) -> None:
        """``node`` runs only after ``requires`` has reported."""
        self.add_node(node)
        self.add_node(requires)
        self.predecessors[node].add(requires)
        self.successors[requires].add(node)

    def __contains__(self, node: object) -> bool:
        return node in self.predecessors

    def __len__(self) -> int:
        return len(self.predecessors)

    @property
    def nodes(self) -> list[GraphNode]:
        return list(self.predecessors)

    def leaves(self) -> list[GraphNode]:
        """Nodes that wait for nothing: where the traversal starts."""
        return sorted(node for node, preds in self.predecessors.items() if not preds)

    def sinks(self) -> list[GraphNode]:
        """Nodes nothing waits for: they report to the stack's sync point."""
        return sorted(node for node, succs in self.successors.items() if not succs)

    def successors_of(self, node: GraphNode) -> list[GraphNode]:
        """Where ``node`` reports: its successors, or the stack when it has none."""
        succs = self.successors.get(node)
        if not succs:
            return [STACK_NODE]
        return sorted(succs)

    def predecessors_of(self, node: GraphNode) -> frozenset[GraphNode] | set[GraphNode]:
        if node == STACK_NODE:
            if self._sinks is None:
                self._sinks = frozenset(n for n, succs in self.successors.items() if not succs)
            return self._sinks
        return self.predecessors.get(node, set())

    def fan_in_part(
        self, target: GraphNode, sender: GraphNode, size: int = FAN_IN_PART
    ) -> FanInPart | None:
        """The group ``sender`` counts in, when ``target`` waits for more than ``size``
        predecessors (None otherwise, or when ``sender`` is not one of them).

        One counter row for 10,000 predecessors serializes their finishes on its lock;
        split into groups of at most ``size`` (by sorted predecessor), each sender
        increments its group's counter, the one completing a group increments the
        target's, and the target is ready once every group is complete.
        """
        preds = self.predecessors_of(target)
        if len(preds) <= size:
            return None
        places = self._places.get(target)
        if places is None:
            places = self._places[target] = {node: i for i, node in enumerate(sorted(preds))}
        place = places.get(sender)
        if place is None:
            return None
        part, count = place // size, len(preds)
        return FanInPart(part, min(size, count - part * size), -(-count // size))

    def pin_hosts(self, hosts: Mapping[int, str]) -> None:
        """Record the host of each resource of the graph that is bound to one."""
        in_graph = {node.resource_id for node in self.predecessors}
        self.hosts = {rid: host for rid, host in hosts.items() if rid in in_graph}

    def host_of(self, node: GraphNode) -> str | None:
        """The host whose workers must check ``node``; None: any worker."""
        return self.hosts.get(node.resource_id)

    def encode(self) -> dict[str, Any]:
        """JSON form: nodes and edges as ``[resource_id, is_update]`` pairs, and the
        ``[resource_id, host]`` pairs of resources bound to a host."""
        encoded: dict[str, Any] = {
            "nodes": [node.encode() for node in sorted(self.predecessors)],
            "edges": [
                [node.encode(), required.encode()]
                for node in sorted(self.predecessors)
                for required in sorted(self.predecessors[node])
            ],
        }
        if self.hosts:
            encoded["hosts"] = sorted([rid, host] for rid, host in self.hosts.items())
        return encoded

    @staticmethod
    def decode(data: Mapping[str, Any]) -> TraversalGraph:
        graph = TraversalGraph()
        for raw in data.get("nodes", []):
            graph.add_node(GraphNode.decode(raw))
        for raw_node, raw_required in data.get("edges", []):
            graph.add_edge(GraphNode.decode(raw_node), GraphNode.decode(raw_required))
        graph.hosts = {int(rid): str(host) for rid, host in data.get("hosts", [])}
        return graph


def choose_rows(
    names: Iterable[str],
    existing: Iterable[ExistingResource],
    target_template_id: int,
    previous_template_id: int | None,
) -> dict[str, ExistingResource | None]:
    """Pick, for every resource name of the target template, the stored row to converge.

    Heat's suitability ranking (``Stack._get_best_existing_rsrc_db``), strongest first:
    a row being deleted, then a FAILED row, loses to any other; a row converged with the
    target template wins (a rollback finds the original that still exists); a row whose
    replacement has been acted on loses to that replacement (the live row dependents point
    at, even when the update that made it never completed); a replacement decided but
    never acted on loses to its original (a newer traversal drops it); a row of the
    previous template wins; then the newest. None: a new row is needed.

    Purely computational, no side-effects.
    """
    rows = list(existing)
    by_id = {row.id: row for row in rows}
    by_name: dict[str, list[ExistingResource]] = {}
    for row in rows:
        by_name.setdefault(row.name, []).append(row)

    def suitability(row: ExistingResource) -> tuple[bool, ...]:
        replacement = by_id.get(row.replaced_by) if row.replaced_by is not None else None
        return (
            not row.deleting,
            not row.failed,
            row.current_template_id == target_template_id,
            replacement is None or replacement.untouched,
            not (row.untouched and row.replaces in by_id),
            previous_template_id is not None and row.current_template_id == previous_template_id,
        )

    chosen: dict[str, ExistingResource | None] = {}
    for name in names:
        candidates = by_name.get(name, [])
        chosen[name] = (
            max(candidates, key=lambda row: (suitability(row), row.id)) if candidates else None
        )
    return chosen


def stands_for(
    row_id: int, existing: Mapping[int, ExistingResource], graph: TraversalGraph
) -> ExistingResource | None:
    """The row that an update node's work ended on: a replacement made during the
    traversal (known to no node of its graph) stands for the row it replaced.

    Purely computational, no side-effects.
    """
    row = existing.get(row_id)
    seen = {row_id}
    while row is not None and row.replaced_by is not None and row.replaced_by not in seen:
        replacement = existing.get(row.replaced_by)
        if replacement is None or _is_in_graph(replacement.id, graph):
            break
        seen.add(replacement.id)
        row = replacement
    return row


def update_phase_done(
    graph: TraversalGraph, existing: Iterable[ExistingResource], template_id: int
) -> bool:
    """Has every update node of ``graph`` converged its resource to ``template_id``?

    Then only cleanup (deleting what the template no longer uses) is left, and reality is
    what ``template_id`` says: an operation that supersedes this traversal builds on it.

    Purely computational, no side-effects.
    """
    rows = {row.id: row for row in existing}
    for node in graph.nodes:
        if not node.is_update or node == STACK_NODE:
            continue
        row = stands_for(node.resource_id, rows, graph)
        if row is None or not row.settled or row.current_template_id != template_id:
            return False
    return True


def _is_in_graph(resource_id: int, graph: TraversalGraph) -> bool:
    return GraphNode(resource_id, True) in graph or GraphNode(resource_id, False) in graph


def build_traversal_graph(
    requirements: Mapping[str, Iterable[str]],
    resource_ids: Mapping[str, int],
    existing: Iterable[ExistingResource],
) -> TraversalGraph:
    """The traversal graph for converging to a template.

    ``requirements``: for each resource name of the target template, the names it requires.
    ``resource_ids``: the row chosen (or made) for each of those names.
    ``existing``: every stored row of the stack before this traversal.

    Purely computational, no side-effects.
    """
    graph = TraversalGraph()
    for name, required_names in requirements.items():
        node = GraphNode(resource_ids[name], True)
        graph.add_node(node)
        for required in required_names:
            graph.add_edge(node, GraphNode(resource_ids[required], True))
    rows = {row.id: row for row in existing}
    chosen = set(resource_ids.values())
    for row in rows.values():
        if row.id in chosen and _needs_no_cleanup(row):
            # Its update node creates it; nothing is there to clean up (the common case of
            # a create: this halves the nodes to walk).
            continue
        cleanup = GraphNode(row.id, False)
        graph.add_node(cleanup)
        for required_id in row.requires:
            if required_id in rows:
                # Delete order from the old relationships: what required me goes first.
                graph.add_edge(GraphNode(required_id, False), cleanup)
        if row.replaces is not None and row.replaces in rows:
            graph.add_edge(GraphNode(row.replaces, False), cleanup)
        update = GraphNode(row.id, True)
        if update in graph:
            graph.add_edge(cleanup, update)
    return graph


def _needs_no_cleanup(row: ExistingResource) -> bool:
    """A chosen row that has never been acted on and orders nothing else."""
    return row.untouched and row.replaces is None and not row.requires
