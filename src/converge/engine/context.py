"""What every part of the engine shares in one process: adapters, caches and identity."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from converge.core.hidden import NOTHING_HIDDEN, HiddenValues
from converge.core.states import Action
from converge.core.template import (
    StackDefinition,
    StackIdentity,
    environment_from_data,
    prepare_stack,
    template_from_data,
)
from converge.core.traversal import STACK_NODE, GraphNode, TraversalGraph
from converge.engine import liveness
from converge.engine.cache import AsyncLru
from converge.engine.settings import EngineSettings
from converge.errors import ConvergeError
from converge.messages import CheckResource, CheckResources
from converge.ports import Bus, Clock, Store
from converge.records import CheckInputs, ResourceRecord
from converge.resources.base import AppliedState
from converge.resources.registry import PluginRegistry

log = logging.getLogger("converge.engine")

# Work messages published at once by ``send_checks``: enough to hide the broker's confirm
# round trip (10,000 leaves one after the other took 5 s, a quarter of that 256 at a time).
SEND_AT_ONCE = 256
# Nodes sent together (a traversal's leaves) go several to a work message: each message
# costs the broker a store and a confirm and each end a publish or a delivery (1,000 leaves
# one to a message took a second to reach two workers on a loaded machine). At most
# ``CHECKS_PER_MESSAGE`` to a message, and never fewer than ``SPREAD_OVER`` messages when
# there are that many nodes, so that a fan-out still spreads over that many workers.
CHECKS_PER_MESSAGE = 32
SPREAD_OVER = 64
# A finish's successors sent on (``hand_on``: a fan-out) go up to ``FAN_OUT_PER_MESSAGE`` to
# a message, in two messages at least when there are two nodes or more (more than a few
# hundred go as leaves do). The worker taking a message checks its nodes together: one
# read for them, their claims in one statement, their finishes in one commit, where one
# node to a message made each check's statements go alone. A tree of 10,000
# ``OS::Heat::None`` with a fan-out of 10, on 2 workers: 12.7 s and 9.2 s of PostgreSQL's
# CPU with one node to a message, 6.9 and 4.8 s with up to eight (7.7 and 5.6 with four).
FAN_OUT_PER_MESSAGE = 8

EMPTY_TEMPLATE: Mapping[str, Any] = {
    "heat_template_version": "2021-04-16",
    "resources": {},
}


class CheckHere(Protocol):
    """Starts a check in this process if it has room for one more (True); ``inputs``:
    what the finish that made the node ready read for it (``Store.finish_node``'s
    ``next_check``), used instead of loading them."""

    def __call__(self, message: CheckResource, inputs: CheckInputs | None = None) -> bool: ...


@dataclass
class EngineContext:
    store: Store
    bus: Bus
    registry: PluginRegistry
    settings: EngineSettings
    clock: Clock
    engine_id: str
    # (traversal, node) being checked here: the sweeper does not re-send those. Sent but
    # not yet received is not tracked: a message lost on the way must be re-sent.
    inflight: set[tuple[str, GraphNode]] = field(default_factory=set)
    live_engines: set[str] = field(default_factory=set)
    # This machine, for resources bound to their host (``ResourcePlugin.bound_to_host``).
    host: str = ""
    # Starts a check in this process if it has room for one more (True), instead of a
    # message through the bus: set by an engine with the worker role (``hand_on``).
    check_here: CheckHere | None = None

    def __post_init__(self) -> None:
        self.definitions: AsyncLru[int, StackDefinition] = AsyncLru(self._load_definition, 32)
        self.graphs: AsyncLru[tuple[str, str], TraversalGraph | None] = AsyncLru(
            self._load_graph, 32
        )

    async def _load_definition(self, template_id: int) -> StackDefinition:
        record = await self.store.get_template(template_id)
        stack = await self.store.get_stack(record.stack_id)
        template = template_from_data(record.template, filename=f"<stack {stack.name}>")
        return prepare_stack(
            template,
            environment=environment_from_data(record.environment),
            parameters=record.parameters,
            files=record.files,
            identity=StackIdentity(stack.name, stack.id, stack.project_id),
            schemas=self.registry,
        )

    async def hidden_values(self, template_id: int | None) -> HiddenValues:
        """The hidden parameter values of a stored template, to keep out of messages;
        none when there is no template or it cannot be prepared again."""
        if template_id is None:
            return NOTHING_HIDDEN
        try:
            return (await self.definitions.get(template_id)).hidden_values
        except ConvergeError:
            return NOTHING_HIDDEN

    async def _load_graph(self, key: tuple[str, str]) -> TraversalGraph | None:
        stack_id, traversal_id = key
        if self.check_here is None:
            current, data = await self.store.get_traversal_graph(stack_id)
        else:
            # Both are read from the database: the template's while the graph's arrives.
            (current, data), _ = await asyncio.gather(
                self.store.get_traversal_graph(stack_id),
                self._warm_definition(stack_id, traversal_id),
            )
        if current != traversal_id or data is None:
            return None
        return TraversalGraph.decode(data)

    async def _warm_definition(self, stack_id: str, traversal_id: str) -> None:
        """In a worker, prepare the traversal's template with its graph: every check of
        the traversal needs both, and a worker's first message is followed by hundreds
        (a prefetch's worth) that wait for the graph, then each read their row; loaded
        after that, the template's reads queued behind all of those rows' (0.3 s for
        1,000 leaves). A template that cannot be prepared is left to the checks, which
        report it."""
        try:
            stack = await self.store.get_stack(stack_id)
            if stack.current_traversal == traversal_id and stack.raw_template_id is not None:
                await self.definitions.get(stack.raw_template_id)
        except ConvergeError as exc:
            log.debug("template not prepared ahead", extra={"error": str(exc)})

    async def graph(self, stack_id: str, traversal_id: str) -> TraversalGraph | None:
        """The graph of a traversal if it is still the stack's current one."""
        graph = await self.graphs.get((stack_id, traversal_id))
        if graph is None:
            self.graphs.forget((stack_id, traversal_id))
        return graph

    def reference_id(self, row: ResourceRecord) -> Any:
        """What ``get_resource`` gives for a stored resource."""
        if row.action == Action.INIT:
            return None
        plugin = self.registry.plugin(row.type)
        return plugin.reference_id(applied_state(row))

    def host_for(self, type_name: str) -> str | None:
        """The host a new resource of this type is bound to: this one, or None (any)."""
        bound = type_name in self.registry and self.registry.plugin(type_name).bound_to_host
        return self.host if bound else None

    async def claim_stands(self, engine_id: str) -> bool:
        """Whether a row claimed by ``engine_id`` is held by a live process. One not alive at
        this process's last heartbeat is looked up again first: a process started since
        (a worker restarted, which takes a prefetch's worth of work at once) is alive, and
        taking its claims over would run two actions on one resource."""
        if engine_id in self.live_engines:
            return True
        alive = await liveness.live_services(
            self.store, self.engine_id, self.clock.now(), self.settings.engine_stale_after
        )
        self.live_engines = {self.engine_id, *(s.engine_id for s in alive)}
        return engine_id in self.live_engines

    async def send_check(self, stack_id: str, traversal_id: str, node: GraphNode) -> None:
        """Queue a check of ``node``: for a resource bound to a host, on that host's queue
        (the graph of the traversal knows which; cached, as the sender just used it)."""
        graph = await self.graph(stack_id, traversal_id)
        host = graph.host_of(node) if graph is not None else None
        message = CheckResource(stack_id, traversal_id, node.resource_id, node.is_update)
        await self.bus.send_work(message.to_dict(), host=host)

    def next_to_continue(
        self, graph: TraversalGraph, node: GraphNode, successors: Iterable[GraphNode]
    ) -> GraphNode | None:
        """The successor of ``node`` whose check this process would continue after
        finishing ``node`` and whose inputs that finish may read (``Store.finish_node``'s
        ``load_next``): the first that may run here and whose only predecessor is
        ``node``, so that the finish's own report is all it waits for. A successor with
        several predecessors is loaded after the finish's commit, as any check: read
        inside the finish, it could miss another predecessor's report (see the store)."""
        if self.check_here is None or not self.settings.continue_locally:
            return None
        for successor in successors:
            if successor == STACK_NODE or graph.host_of(successor) not in (None, self.host):
                continue
            if graph.predecessors_of(successor) == {node}:
                return successor
        return None

    async def hand_on(
        self,
        stack_id: str,
        traversal_id: str,
        ready: Iterable[GraphNode],
        *,
        loaded: tuple[GraphNode, CheckInputs] | None = None,
    ) -> GraphNode | None:
        """Start the checks of the nodes a finish made ready: one of them in this process
        (local continuation: a chain's next link skips the broker's round trip and another
        worker's wake-up), the others through the bus, several to a message
        (``FAN_OUT_PER_MESSAGE``) in two messages at least, so a fan-out is still spread
        over the workers. A node bound to another host is always
        sent to that host's queue.

        Crash safety is a lost message's: the finish that made the node ready is committed
        first, so a process that dies before the continued check stores its result leaves
        the node ready and unclaimed, and the sweeper sends it again.

        ``loaded``: a ready node and the inputs the finish read for it; that node is the
        one offered first, with them. Returns the node continued here, if any.
        """
        nodes = list(ready)
        if not nodes:
            return None
        if loaded is not None and loaded[0] in nodes:
            nodes.remove(loaded[0])
            nodes.insert(0, loaded[0])
        graph = await self.graph(stack_id, traversal_id)
        # At most one node is continued here; none without the worker role or room.
        may_continue = self.check_here is not None and self.settings.continue_locally
        sent: list[GraphNode] = []
        continued = None
        for node in nodes:
            host = graph.host_of(node) if graph is not None else None
            if may_continue and host in (None, self.host):
                assert self.check_here is not None
                message = CheckResource(stack_id, traversal_id, node.resource_id, node.is_update)
                inputs = loaded[1] if loaded is not None and loaded[0] == node else None
                if self.check_here(message, inputs):
                    may_continue, continued = False, node
                    continue
            sent.append(node)
        await self._send_nodes(stack_id, traversal_id, graph, sent, fan_out_per_message)
        return continued

    async def send_checks(
        self, stack_id: str, traversal_id: str, nodes: Iterable[GraphNode]
    ) -> None:
        """Queue checks of many nodes (a traversal's leaves), several to a message
        (``CheckResources``, see ``checks_per_message``), ``SEND_AT_ONCE`` messages in
        flight at a time, as a broker confirms each message (one round trip) and pipelines
        many."""
        graph = await self.graph(stack_id, traversal_id)
        await self._send_nodes(stack_id, traversal_id, graph, nodes)

    async def _send_nodes(
        self,
        stack_id: str,
        traversal_id: str,
        graph: TraversalGraph | None,
        nodes: Iterable[GraphNode],
        per_message: Callable[[int], int] | None = None,
    ) -> None:
        by_host: dict[str | None, list[GraphNode]] = {}
        for node in nodes:
            host = graph.host_of(node) if graph is not None else None
            by_host.setdefault(host, []).append(node)
        messages: list[tuple[dict[str, Any], str | None]] = []
        for host, group in by_host.items():
            size = (per_message or checks_per_message)(len(group))
            for start in range(0, len(group), size):
                part = group[start : start + size]
                messages.append((_work_message(stack_id, traversal_id, part), host))
        if len(messages) == 1:  # a finish's one successor sent on: no gathering
            message, host = messages[0]
            await self.bus.send_work(message, host=host)
            return
        for start in range(0, len(messages), SEND_AT_ONCE):
            batch = messages[start : start + SEND_AT_ONCE]
            await asyncio.gather(*(self.bus.send_work(m, host=host) for m, host in batch))


def checks_per_message(count: int) -> int:
    """How many of ``count`` nodes sent together go in one work message: one each below
    twice ``SPREAD_OVER`` nodes, then as many as still make ``SPREAD_OVER`` messages or
    more (a fan-out stays spread over that many workers), at most ``CHECKS_PER_MESSAGE``."""
    return max(1, min(CHECKS_PER_MESSAGE, count // SPREAD_OVER))


def fan_out_per_message(count: int) -> int:
    """How many of a finish's ``count`` successors sent on go in one work message
    (``FAN_OUT_PER_MESSAGE``)."""
    return max(checks_per_message(count), min(FAN_OUT_PER_MESSAGE, -(-count // 2)))


def _work_message(stack_id: str, traversal_id: str, nodes: list[GraphNode]) -> dict[str, Any]:
    if len(nodes) == 1:
        node = nodes[0]
        return CheckResource(stack_id, traversal_id, node.resource_id, node.is_update).to_dict()
    pairs = tuple((node.resource_id, node.is_update) for node in nodes)
    return CheckResources(stack_id, traversal_id, pairs).to_dict()


def applied_state(row: ResourceRecord) -> AppliedState:
    return AppliedState(row.physical_resource_id, row.properties_data, row.plugin_data)
