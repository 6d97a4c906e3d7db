"""How a traversal's leaves are sent: several to a work message once there are more than
``SPREAD_OVER``, never more than ``CHECKS_PER_MESSAGE`` to one, each node exactly once,
and a node bound to a host in a message to that host's queue; and a finish's successors,
up to ``FAN_OUT_PER_MESSAGE`` to a message."""

from __future__ import annotations

from typing import Any, cast

import pytest

from converge.adapters.local_bus import LocalBus
from converge.core.traversal import STACK_NODE, GraphNode, TraversalGraph
from converge.engine.clock import SystemClock
from converge.engine.context import (
    CHECKS_PER_MESSAGE,
    FAN_OUT_PER_MESSAGE,
    SPREAD_OVER,
    CheckHere,
    EngineContext,
    checks_per_message,
    fan_out_per_message,
)
from converge.engine.settings import EngineSettings
from converge.messages import CheckResource, work_checks
from converge.ports import Store
from converge.records import CheckInputs
from converge.resources.registry import default_registry

ELSEWHERE = "elsewhere"


class SendingBus(LocalBus):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[dict[str, Any], str | None]] = []

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.sent.append((message, host))


def _taking(taken: list[CheckResource]) -> CheckHere:
    """A process's ``check_here`` with room for everything it is offered."""

    def take(message: CheckResource, inputs: CheckInputs | None = None) -> bool:
        taken.append(message)
        return True

    return take


def _context(
    monkeypatch: pytest.MonkeyPatch,
    count: int,
    bound: frozenset[int] = frozenset(),
    taken: list[CheckResource] | None = None,
) -> tuple[EngineContext, SendingBus, list[GraphNode]]:
    leaves = [GraphNode(i, True) for i in range(1, count + 1)]
    graph = TraversalGraph()
    for node in leaves:
        graph.add_edge(node, STACK_NODE)
    graph.pin_hosts(dict.fromkeys(bound, ELSEWHERE))
    bus = SendingBus()
    ctx = EngineContext(
        store=cast(Store, None),  # the graph below is all it reads
        bus=bus,
        registry=default_registry(),
        settings=EngineSettings(),
        clock=SystemClock(),
        engine_id="e",
        host="here",
        check_here=None if taken is None else _taking(taken),
    )

    async def the_graph(stack_id: str, traversal_id: str) -> TraversalGraph:
        return graph

    monkeypatch.setattr(ctx, "graph", the_graph)
    return ctx, bus, leaves


@pytest.mark.parametrize(
    ("count", "per_message"),
    [
        (1, 1),
        (SPREAD_OVER, 1),
        (2 * SPREAD_OVER - 1, 1),
        (2 * SPREAD_OVER, 2),
        (1000, 15),
        (10_000, CHECKS_PER_MESSAGE),
    ],
)
def test_nodes_per_message(count: int, per_message: int) -> None:
    assert checks_per_message(count) == per_message


async def test_a_few_leaves_go_one_to_a_message(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx, bus, leaves = _context(monkeypatch, 10)
    await ctx.send_checks("s", "t", leaves)
    assert [message["kind"] for message, _ in bus.sent] == ["check_resource"] * 10
    assert [message["resource_id"] for message, _ in bus.sent] == list(range(1, 11))


@pytest.mark.parametrize("count", [2 * SPREAD_OVER, 1000, 5000])
async def test_many_leaves_go_several_to_a_message_each_once(
    monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    ctx, bus, leaves = _context(monkeypatch, count)
    await ctx.send_checks("s", "t", leaves)
    checks = [check for message, _ in bus.sent for check in work_checks(message)]
    assert [GraphNode(c.resource_id, c.is_update) for c in checks] == leaves
    assert {(c.stack_id, c.traversal_id) for c in checks} == {("s", "t")}
    sizes = [len(work_checks(message)) for message, _ in bus.sent]
    assert max(sizes) <= CHECKS_PER_MESSAGE
    assert len(bus.sent) >= SPREAD_OVER
    assert len(bus.sent) < count


async def test_leaves_bound_to_a_host_go_in_messages_to_its_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bound = frozenset(range(1, 201, 2))  # every other leaf of 200
    ctx, bus, leaves = _context(monkeypatch, 200, bound)
    await ctx.send_checks("s", "t", leaves)
    for message, host in bus.sent:
        ids = {check.resource_id for check in work_checks(message)}
        assert ids <= bound if host == ELSEWHERE else not ids & bound
    sent = sorted(check.resource_id for m, _ in bus.sent for check in work_checks(m))
    assert sent == [leaf.resource_id for leaf in leaves]


async def test_a_big_fan_out_continues_one_node_and_sends_the_rest_together(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taken: list[CheckResource] = []
    ctx, bus, ready = _context(monkeypatch, 2 * SPREAD_OVER + 1, taken=taken)
    await ctx.hand_on("s", "t", ready)
    assert [check.resource_id for check in taken] == [ready[0].resource_id]
    sent = [GraphNode(c.resource_id, c.is_update) for m, _ in bus.sent for c in work_checks(m)]
    assert sent == ready[1:]
    assert len(bus.sent) < len(sent)


@pytest.mark.parametrize(
    ("count", "per_message"),
    [
        (1, 1),
        (2, 1),  # two nodes: two messages, two workers may take them
        (3, 2),
        (9, 5),  # a fan-out of 10 less the one continued: two messages
        (16, FAN_OUT_PER_MESSAGE),
        (2 * SPREAD_OVER, FAN_OUT_PER_MESSAGE),
        (1000, 15),  # as leaves go
    ],
)
def test_successors_per_message(count: int, per_message: int) -> None:
    assert fan_out_per_message(count) == per_message


@pytest.mark.parametrize("count", [2, 9, 40])
async def test_a_finish_sends_its_successors_several_to_a_message_each_once(
    monkeypatch: pytest.MonkeyPatch, count: int
) -> None:
    """Checked together by the worker that takes them (one read, one claim statement,
    one commit for their finishes), yet never all in one message."""
    ctx, bus, successors = _context(monkeypatch, count)
    await ctx.hand_on("s", "t", successors)
    checks = [check for message, _ in bus.sent for check in work_checks(message)]
    assert [GraphNode(c.resource_id, c.is_update) for c in checks] == successors
    sizes = [len(work_checks(message)) for message, _ in bus.sent]
    assert len(sizes) >= 2 and max(sizes) <= FAN_OUT_PER_MESSAGE
    assert len(sizes) == -(-count // fan_out_per_message(count))
