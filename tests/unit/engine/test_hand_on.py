"""Which ready nodes a finish continues in its own process and which it sends: one node
that may run on this host, when the process takes it; everything else through the bus,
a node bound to a host to that host's queue."""

from __future__ import annotations

from typing import Any, cast

import pytest

from converge.adapters.local_bus import LocalBus
from converge.core.traversal import GraphNode, TraversalGraph
from converge.engine.clock import SystemClock
from converge.engine.context import EngineContext
from converge.engine.settings import EngineSettings
from converge.messages import CheckResource
from converge.ports import Store
from converge.records import CheckInputs
from converge.resources.registry import default_registry

HERE, ELSEWHERE = "here", "elsewhere"
ROOT = GraphNode(1, True)
FREE, FREE_TOO = GraphNode(2, True), GraphNode(3, True)
BOUND_HERE, BOUND_ELSEWHERE = GraphNode(4, True), GraphNode(5, True)
JOINED = GraphNode(6, True)  # waits for FREE and FREE_TOO


class SendingBus(LocalBus):
    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[int, str | None]] = []

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.sent.append((message["resource_id"], host))


class Taker:
    """The process's ``check_here``: takes what it is offered while it has room."""

    def __init__(self, room: int) -> None:
        self.room = room
        self.taken: list[int] = []
        self.inputs: list[CheckInputs | None] = []

    def __call__(self, message: CheckResource, inputs: CheckInputs | None = None) -> bool:
        if len(self.taken) >= self.room:
            return False
        self.taken.append(message.resource_id)
        self.inputs.append(inputs)
        return True


def _graph() -> TraversalGraph:
    graph = TraversalGraph()
    for node in (FREE, FREE_TOO, BOUND_HERE, BOUND_ELSEWHERE):
        graph.add_edge(node, ROOT)
    graph.add_edge(JOINED, FREE)
    graph.add_edge(JOINED, FREE_TOO)
    graph.pin_hosts({BOUND_HERE.resource_id: HERE, BOUND_ELSEWHERE.resource_id: ELSEWHERE})
    return graph


def _context(
    monkeypatch: pytest.MonkeyPatch, taker: Taker | None, **settings: Any
) -> tuple[EngineContext, SendingBus]:
    graph = _graph()
    bus = SendingBus()
    ctx = EngineContext(
        store=cast(Store, None),  # the graph below is all it reads
        bus=bus,
        registry=default_registry(),
        settings=EngineSettings(**settings),
        clock=SystemClock(),
        engine_id="e",
        host=HERE,
        check_here=taker,
    )

    async def the_graph(stack_id: str, traversal_id: str) -> TraversalGraph:
        return graph

    monkeypatch.setattr(ctx, "graph", the_graph)
    return ctx, bus


async def test_one_ready_node_is_continued_and_the_others_sent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taker = Taker(room=10)
    ctx, bus = _context(monkeypatch, taker)
    await ctx.hand_on("s", "t", [FREE, FREE_TOO])
    assert taker.taken == [FREE.resource_id]
    assert bus.sent == [(FREE_TOO.resource_id, None)]


async def test_a_node_bound_to_another_host_is_sent_to_its_queue(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taker = Taker(room=10)
    ctx, bus = _context(monkeypatch, taker)
    await ctx.hand_on("s", "t", [BOUND_ELSEWHERE, FREE])
    assert bus.sent == [(BOUND_ELSEWHERE.resource_id, ELSEWHERE)]
    assert taker.taken == [FREE.resource_id]


async def test_a_node_bound_to_another_host_alone_is_never_continued(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taker = Taker(room=10)
    ctx, bus = _context(monkeypatch, taker)
    await ctx.hand_on("s", "t", [BOUND_ELSEWHERE])
    assert taker.taken == []
    assert bus.sent == [(BOUND_ELSEWHERE.resource_id, ELSEWHERE)]


async def test_a_node_bound_to_this_host_is_continued(monkeypatch: pytest.MonkeyPatch) -> None:
    taker = Taker(room=10)
    ctx, bus = _context(monkeypatch, taker)
    await ctx.hand_on("s", "t", [BOUND_HERE])
    assert taker.taken == [BOUND_HERE.resource_id]
    assert bus.sent == []


async def test_without_room_every_node_is_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    taker = Taker(room=0)
    ctx, bus = _context(monkeypatch, taker)
    await ctx.hand_on("s", "t", [FREE, FREE_TOO])
    assert bus.sent == [(FREE.resource_id, None), (FREE_TOO.resource_id, None)]


@pytest.mark.parametrize("continuing", [False, None], ids=["turned off", "no worker role"])
async def test_without_continuation_every_node_is_sent(
    monkeypatch: pytest.MonkeyPatch, continuing: bool | None
) -> None:
    taker = Taker(room=10)
    if continuing is None:
        ctx, bus = _context(monkeypatch, None)
    else:
        ctx, bus = _context(monkeypatch, taker, continue_locally=continuing)
    await ctx.hand_on("s", "t", [FREE, BOUND_HERE])
    assert taker.taken == []
    assert bus.sent == [(FREE.resource_id, None), (BOUND_HERE.resource_id, HERE)]


def test_the_successor_read_with_a_finish_waits_for_that_finish_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Its inputs are the finish's own report: a successor with another predecessor is
    never read with the finish, nor one this process would not continue."""
    graph = _graph()
    ctx, _bus = _context(monkeypatch, Taker(room=10))
    assert ctx.next_to_continue(graph, ROOT, graph.successors_of(ROOT)) == FREE
    assert ctx.next_to_continue(graph, FREE, graph.successors_of(FREE)) is None  # JOINED
    assert ctx.next_to_continue(graph, ROOT, [BOUND_ELSEWHERE, BOUND_HERE]) == BOUND_HERE
    off, _bus = _context(monkeypatch, Taker(room=10), continue_locally=False)
    assert off.next_to_continue(graph, ROOT, graph.successors_of(ROOT)) is None
    no_worker, _bus = _context(monkeypatch, None)
    assert no_worker.next_to_continue(graph, ROOT, graph.successors_of(ROOT)) is None


async def test_the_node_read_with_the_finish_is_continued_with_its_inputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    taker = Taker(room=10)
    ctx, bus = _context(monkeypatch, taker)
    inputs = cast(CheckInputs, object())
    await ctx.hand_on("s", "t", [FREE, FREE_TOO], loaded=(FREE_TOO, inputs))
    assert (taker.taken, taker.inputs) == ([FREE_TOO.resource_id], [inputs])
    assert bus.sent == [(FREE.resource_id, None)]
