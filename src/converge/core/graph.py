"""A dependency graph over hashable keys: orders, cycles and slices, all iterative and fast.

An edge ``a -> b`` means "``a`` requires ``b``": ``b`` must be converged before ``a`` and
deleted after it. Every algorithm here is iterative (no recursion limit at 10,000-deep
chains) and linear or ``O((V + E) log V)`` at worst. Ties are broken by insertion order, so
the same requirements always give the same order.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Hashable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class CycleError(ValueError):
    """The graph has a cycle, so it has no order; ``cycle`` lists the nodes on one."""

    def __init__(self, cycle: list[object]) -> None:
        self.cycle = cycle
        path = " -> ".join(str(node) for node in [*cycle, *cycle[:1]])
        super().__init__(f"dependency cycle: {path}")


class DependencyGraph(Generic[K]):
    """An immutable set of nodes and "requires" edges between them."""

    __slots__ = ("_index", "_nodes", "_required_by", "_requires")

    def __init__(self, nodes: Iterable[K], edges: Iterable[tuple[K, K]] = ()) -> None:
        """Nodes in insertion order, and ``(node, dependency)`` edges between known nodes."""
        self._nodes: list[K] = []
        self._index: dict[K, int] = {}
        for node in nodes:
            if node not in self._index:
                self._index[node] = len(self._nodes)
                self._nodes.append(node)
        requires: list[dict[int, None]] = [{} for _ in self._nodes]
        index = self._index
        for node, dependency in edges:
            try:
                # a dict keeps first-seen order and drops repeats
                requires[index[node]][index[dependency]] = None
            except KeyError:
                self._position(node, "node")  # raises the error naming the unknown node
                self._position(dependency, f"requirement of {node!r}")
                raise
        self._requires: list[tuple[int, ...]] = [tuple(targets) for targets in requires]
        required_by: list[list[int]] = [[] for _ in self._nodes]
        for source, targets in enumerate(self._requires):
            for target in targets:
                required_by[target].append(source)
        self._required_by: list[tuple[int, ...]] = [tuple(sources) for sources in required_by]

    @classmethod
    def from_requirements(cls, requirements: Mapping[K, Iterable[K]]) -> DependencyGraph[K]:
        """A graph from ``{node: what it requires}``; every required node must be a key."""
        edges = [(node, dependency) for node, deps in requirements.items() for dependency in deps]
        return cls(requirements.keys(), edges)

    def _position(self, node: K, role: str) -> int:
        try:
            return self._index[node]
        except KeyError:
            raise ValueError(f"unknown {role}: {node!r} is not in the graph") from None

    def _known(self, node: K) -> int:
        try:
            return self._index[node]
        except KeyError:
            raise KeyError(f"{node!r} is not in the graph") from None

    # --- Shape -------------------------------------------------------------------------------

    @property
    def nodes(self) -> tuple[K, ...]:
        """Every node, in insertion order."""
        return tuple(self._nodes)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node: object) -> bool:
        return node in self._index

    def __iter__(self) -> Iterator[K]:
        return iter(self._nodes)

    def __repr__(self) -> str:
        return f"DependencyGraph({len(self._nodes)} nodes, {self.edge_count()} edges)"

    def edges(self) -> Iterator[tuple[K, K]]:
        """Every ``(node, dependency)`` pair, nodes in insertion order."""
        nodes = self._nodes
        for source, targets in enumerate(self._requires):
            for target in targets:
                yield nodes[source], nodes[target]

    def edge_count(self) -> int:
        return sum(len(targets) for targets in self._requires)

    def requires(self, node: K) -> tuple[K, ...]:
        """What ``node`` directly requires, in the order its requirements were given."""
        return tuple(self._nodes[target] for target in self._requires[self._known(node)])

    def required_by(self, node: K) -> tuple[K, ...]:
        """The nodes that directly require ``node``, in insertion order."""
        return tuple(self._nodes[source] for source in self._required_by[self._known(node)])

    def leaves(self) -> tuple[K, ...]:
        """Nodes requiring nothing: where a create starts."""
        return tuple(
            node for node, targets in zip(self._nodes, self._requires, strict=True) if not targets
        )

    def roots(self) -> tuple[K, ...]:
        """Nodes nothing requires: where a delete starts."""
        return tuple(
            node
            for node, sources in zip(self._nodes, self._required_by, strict=True)
            if not sources
        )

    # --- Orders ------------------------------------------------------------------------------

    def topological_order(self) -> list[K]:
        """Dependencies before the nodes requiring them; raises ``CycleError`` on a cycle."""
        return [self._nodes[i] for i in self._kahn(self._requires, self._required_by)]

    def reverse_order(self) -> list[K]:
        """Nodes before their dependencies (the order of deletion); ties in insertion order."""
        return [self._nodes[i] for i in self._kahn(self._required_by, self._requires)]

    def levels(self) -> list[list[K]]:
        """Nodes grouped by the longest chain of requirements below them.

        Level 0 holds the leaves; every node of level ``n`` requires something of level
        ``n - 1``, and everything it requires is below ``n``: each level can run in parallel
        once the levels before it are done.
        """
        depth = [0] * len(self._nodes)
        for i in self._kahn(self._requires, self._required_by):
            for target in self._requires[i]:
                depth[i] = max(depth[i], depth[target] + 1)
        grouped: list[list[K]] = [[] for _ in range(max(depth, default=-1) + 1)]
        for i, node in enumerate(self._nodes):
            grouped[depth[i]].append(node)
        return grouped

    def _kahn(self, waits_for: list[tuple[int, ...]], releases: list[tuple[int, ...]]) -> list[int]:
        # Kahn's algorithm with a heap of ready indices: among ready nodes the earliest
        # inserted goes first, which makes the order stable.
        pending = [len(targets) for targets in waits_for]
        ready = [i for i, count in enumerate(pending) if count == 0]
        heapq.heapify(ready)
        order: list[int] = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for other in releases[i]:
                pending[other] -= 1
                if pending[other] == 0:
                    heapq.heappush(ready, other)
        if len(order) < len(self._nodes):
            cycle = self.find_cycle()
            raise CycleError(list(cycle or []))
        return order

    # --- Cycles ------------------------------------------------------------------------------

    def find_cycle(self) -> list[K] | None:
        """The nodes of one cycle in edge order, or None when the graph is acyclic.

        ``['a', 'b', 'c']`` means a requires b, b requires c and c requires a (the first node
        is not repeated). Searches from nodes in insertion order, so the answer is stable.
        """
        white, grey, black = 0, 1, 2
        colour = [white] * len(self._nodes)
        for start in range(len(self._nodes)):
            if colour[start] != white:
                continue
            # An explicit stack of (node, next requirement to look at) replaces recursion.
            path: list[int] = [start]
            cursor: list[int] = [0]
            colour[start] = grey
            while path:
                node = path[-1]
                targets = self._requires[node]
                if cursor[-1] == len(targets):
                    colour[node] = black
                    path.pop()
                    cursor.pop()
                    continue
                target = targets[cursor[-1]]
                cursor[-1] += 1
                if colour[target] == grey:
                    begin = path.index(target)
                    return [self._nodes[i] for i in path[begin:]]
                if colour[target] == white:
                    colour[target] = grey
                    path.append(target)
                    cursor.append(0)
        return None

    def is_acyclic(self) -> bool:
        return self.find_cycle() is None

    # --- Slices ------------------------------------------------------------------------------

    def subgraph(self, nodes: Iterable[K]) -> DependencyGraph[K]:
        """The graph induced by ``nodes`` (edges between them only), in this graph's order."""
        wanted = {self._position(node, "subgraph node") for node in nodes}
        kept = sorted(wanted)
        edges = [
            (self._nodes[source], self._nodes[target])
            for source in kept
            for target in self._requires[source]
            if target in wanted
        ]
        return DependencyGraph([self._nodes[i] for i in kept], edges)

    def all_requirements(self, nodes: Collection[K]) -> set[K]:
        """Everything ``nodes`` require, directly or through others (excluding themselves
        unless they sit on a cycle)."""
        return self._reach(nodes, self._requires)

    def all_dependents(self, nodes: Collection[K]) -> set[K]:
        """Everything that requires ``nodes``, directly or through others."""
        return self._reach(nodes, self._required_by)

    def _reach(self, nodes: Collection[K], step: list[tuple[int, ...]]) -> set[K]:
        seen: set[int] = set()
        frontier = [self._known(node) for node in nodes]
        while frontier:
            for target in step[frontier.pop()]:
                if target not in seen:
                    seen.add(target)
                    frontier.append(target)
        return {self._nodes[i] for i in seen}
