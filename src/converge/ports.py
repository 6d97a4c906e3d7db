"""The ports between the engine, the observer and their adapters: store, baseline, bus, clock.

The engine, the synchronizer and the API depend on these protocols only; which adapter
stands behind them (``SqlStore`` on SQLite or PostgreSQL, ``LocalBus`` or the RabbitMQ
bus) is chosen where a process is put together (``converge.api``). Import-linter holds
that line: ``converge.engine`` and ``converge.observe`` cannot import ``converge.adapters``.
"""

from __future__ import annotations

from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Protocol

from converge.core.baseline import ManagedEntity, Observation, Snapshot
from converge.core.states import Action
from converge.core.traversal import FanInPart, GraphNode
from converge.errors import StateError
from converge.messages import ChangeNotification
from converge.records import (
    CheckInputs,
    ClaimAhead,
    EventRecord,
    FinishedNode,
    NewEvent,
    NewResource,
    NewTemplate,
    ResourceRecord,
    ServiceRecord,
    StackRecord,
    TemplateRecord,
)
from converge.resources.base import Clock

__all__ = ["BaselineStore", "Bus", "Clock", "Store", "Subscriber", "WorkHandler"]

# Starts the work in a message and returns an awaitable of its completion (its result
# committed): a bus with acknowledgements acknowledges only then, so work that a dead
# process never finished is delivered again; a bus without them need not wait.
WorkHandler = Callable[[dict[str, Any]], Awaitable[None]]


class Subscriber(Protocol):
    """A bound subscription: the notifications of its topic, in publication order."""

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]: ...

    async def close(self) -> None:
        """Stop receiving; an iteration in progress ends."""


class Bus(Protocol):
    """Sends work to workers and change notifications to subscribers."""

    # Whether work sent for a host reaches that host's workers (a broker), or every
    # message stays in this process (the in-process bus: every host is this one).
    reaches_other_hosts: bool

    async def connect(self) -> None:
        """Reach the broker now (idempotent): ``Unavailable`` if it cannot be reached, so a
        command refuses before it starts anything rather than when it first sends work."""

    async def start(self, work_handler: WorkHandler) -> None:
        """Begin delivering work messages to ``work_handler``."""

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        """Queue a work message for some worker, or for a worker on ``host`` (work on
        things that exist only on that machine)."""

    async def publish(self, topic: str, message: dict[str, Any]) -> None:
        """Deliver a notification to every current subscriber of ``topic``."""

    async def subscribe(self, topic: str) -> Subscriber:
        """Subscribe to ``topic`` (``*``: every topic). Returns once the subscription is in
        place: everything published after that reaches it, so "subscribe, then get all"
        cannot miss a change."""

    async def close(self) -> None: ...


class BaselineStore(Protocol):
    """The synchronizer's baseline: observed entities, hashed, numbered per type."""

    async def managed(self, type_names: Collection[str] | None = None) -> list[ManagedEntity]:
        """Resource rows of live stacks that have a physical id and are not deleted."""

    async def reconcile(
        self,
        type_name: str,
        observed: Mapping[str, Observation],
        *,
        complete: bool,
        gone: Collection[str] = (),
        unknown: Collection[str] = (),
        observed_at: float,
        now: float,
    ) -> list[ChangeNotification]:
        """Bring the baseline of ``type_name`` up to an observation; the changes that won
        (compare-and-swap: one change gives one notification however many samplers saw it)."""

    async def snapshot(self, type_name: str | None = None) -> Snapshot:
        """Every entity of a type (or all), with the sequence numbers it is consistent with."""

    async def sequence(self, type_name: str) -> int:
        """The type's current sequence number (0 before its first change)."""


class Store(Protocol):
    """The truth every engine process shares: stacks, resources, sync points, events.

    Each coroutine is one transaction. Rows that workers race on are written by
    compare-and-swap (``expected_key``: None back when someone else wrote first), and a
    sync point fires for exactly one of the predecessors that complete it.
    """

    @property
    def entities(self) -> BaselineStore:
        """The synchronizer's baseline, kept in the same database."""

    @property
    def location(self) -> str:
        """What errors name: the state file's path, or the database URL without password."""

    @property
    def failure(self) -> StateError | None:
        """The fatal error that made the store unusable (a damaged or full state), if any:
        every later call raises it again, so a long run stops instead of retrying."""

    async def close(self) -> None: ...

    # --- templates -------------------------------------------------------------------

    async def add_template(
        self,
        stack_id: str,
        template: Mapping[str, Any],
        environment: Mapping[str, Any],
        files: Mapping[str, str],
        parameters: Mapping[str, Any],
    ) -> int: ...

    async def get_template(self, template_id: int) -> TemplateRecord: ...

    # --- stacks ----------------------------------------------------------------------

    async def create_stack(
        self,
        name: str,
        project_id: str,
        *,
        action: Action,
        disable_rollback: bool,
        timeout_mins: float | None,
        drift_policy: str,
        tags: Sequence[str] = (),
        stack_id: str | None = None,
        owner_id: str | None = None,
        template: NewTemplate | None = None,
    ) -> StackRecord: ...

    async def get_stack(self, stack_id: str) -> StackRecord: ...

    async def find_stack(
        self, name_or_id: str, project_id: str, *, include_deleted: bool = False
    ) -> StackRecord: ...

    async def list_stacks(
        self, project_id: str | None = None, *, include_deleted: bool = False
    ) -> list[StackRecord]: ...

    async def get_traversal_graph(self, stack_id: str) -> tuple[str, Mapping[str, Any] | None]:
        """The current traversal id and its stored graph."""

    async def update_stack(
        self,
        stack_id: str,
        changes: Mapping[str, Any],
        *,
        expected_key: int | None = None,
        expected_traversal: str | None = None,
        events: Sequence[NewEvent] = (),
    ) -> StackRecord | None:
        """Compare-and-swap a stack row; None when the expectation no longer holds."""

    async def start_traversal(
        self,
        stack_id: str,
        expected_key: int,
        new_resources: Sequence[NewResource],
        build: Callable[[list[ResourceRecord]], tuple[Mapping[str, Any], Mapping[str, Any]]],
        events: Sequence[NewEvent] = (),
    ) -> StackRecord | None:
        """Atomically add resource rows and point the stack at a new traversal."""

    async def purge_stack_data(self, stack_id: str, keep_template_ids: Iterable[int]) -> None:
        """Drop sync points and templates the stack no longer needs."""

    async def mark_stack_deleted(self, stack_id: str) -> None: ...

    # --- resources -------------------------------------------------------------------

    async def list_resources(self, stack_id: str) -> list[ResourceRecord]: ...

    async def resource_types(self, stack_id: str) -> set[str]: ...

    async def resource_hosts(self, stack_id: str) -> list[tuple[str, str | None]]:
        """(name, host) of each resource row of the stack; host None when not bound."""

    async def get_resource(self, resource_id: int) -> ResourceRecord | None: ...

    async def load_for_check(
        self, stack_id: str, node: GraphNode, traversal_id: str, *, with_reports: bool = True
    ) -> CheckInputs:
        """Everything a worker reads before deciding: stack, resource, sync point reports."""

    async def update_resource(
        self,
        resource_id: int,
        expected_key: int,
        changes: Mapping[str, Any],
        *,
        events: Sequence[NewEvent] = (),
        stack_id: str | None = None,
        current: ResourceRecord | None = None,
    ) -> ResourceRecord | None:
        """Compare-and-swap a resource row; None when someone else changed it first."""

    async def set_drift(
        self,
        resource_id: int,
        changes: Mapping[str, Any],
        *,
        events: Sequence[NewEvent] = (),
        stack_id: str | None = None,
        observed_at: float | None = None,
    ) -> bool:
        """Write drift and heal columns only, without taking the row's ``atomic_key``."""

    async def add_replacement(
        self, old: ResourceRecord, new: NewResource, old_changes: Mapping[str, Any]
    ) -> tuple[ResourceRecord, ResourceRecord] | None:
        """Make the row of a replacement and mark the old row replaced, atomically."""

    # --- sync points -----------------------------------------------------------------

    async def finish_node(
        self,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        *,
        resource_id: int | None,
        expected_key: int | None,
        changes: Mapping[str, Any] | None,
        delete_resource: bool = False,
        events: Sequence[NewEvent] = (),
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        kept_if_superseded: Mapping[str, Any] | None = None,
        fan_in: Mapping[GraphNode, FanInPart] | None = None,
        load_next: GraphNode | None = None,
        claim_next: ClaimAhead | None = None,
        read_ahead: GraphNode | None = None,
    ) -> FinishedNode:
        """Store a node's result and report it to its successors in one transaction:
        (stored, the successors this report made ready, the stack's current traversal,
        the inputs of ``load_next`` or None).
        ``kept_if_superseded``: a row this node deletes is updated with these changes
        instead when a newer traversal started meanwhile (it may have chosen the row).
        ``fan_in``: the sender's group in targets with many predecessors
        (``TraversalGraph.fan_in_part``), which a store may count by group; every
        sender of a traversal passes them alike.
        ``load_next``: a successor whose only predecessor is ``sender`` (the caller
        promises it; its expected count is 1), whose check the caller will start at once:
        a store may read its stack and row with the finish and give them back with the
        finish's own report as ``next_check``, equal to what ``load_for_check`` would read
        right after (with reports). A store that does not (SQLite: inline and cheap), or
        cannot vouch for them (the successor was already reported, or its row is the
        one this finish writes), gives None, and the caller loads them.
        ``claim_next``: a claim of the row of ``load_next``, made in the same transaction
        only when that transaction stores this finish, makes ``load_next`` ready with its
        first report, finds the traversal still current and the row's key unchanged
        (its compare-and-swap); the claimed row comes back as ``claimed_next``. A link of
        a chain then commits once instead of twice. A store may never claim (SQLite: its
        commits are cheap), the caller then claims as usual.
        ``read_ahead``: a row a store may read with the finish, as it was before the
        transaction (``ahead``): the row a continued check's own finish may claim."""

    async def count_reports(self, traversal_id: str, target: GraphNode) -> int: ...

    async def reported_senders(self, traversal_id: str) -> set[GraphNode]:
        """Every node that has reported in a traversal (the sweeper's view of progress)."""

    # --- events ----------------------------------------------------------------------

    async def add_events(self, stack_id: str, events: Sequence[NewEvent]) -> None: ...

    async def latest_event_id(self) -> int:
        """The newest event's id, 0 when none: it moves whenever any work is being done."""

    async def list_events(
        self,
        stack_id: str,
        *,
        resource_name: str | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> list[EventRecord]: ...

    # --- services --------------------------------------------------------------------

    async def register_service(self, record: ServiceRecord) -> None: ...

    async def heartbeat(self, engine_id: str, now: float) -> None: ...

    async def remove_service(self, engine_id: str) -> None:
        """The process is gone: drop its row and let go of the resource rows it claimed."""

    async def list_services(self) -> list[ServiceRecord]: ...

    async def live_engines(self, heartbeat_after: float) -> set[str]: ...

    # --- leases ----------------------------------------------------------------------

    async def take_lease(
        self, name: str, holder: str, *, now: float, ttl: float | None, live_after: float
    ) -> bool:
        """Take or renew the lease ``name`` for ``holder`` (an engine id), atomically
        across processes: True when it was free, expired (``ttl`` seconds after taking;
        None: never), held by ``holder`` already, or held by an engine whose heartbeat is
        not after ``live_after`` (dead); False while another live engine holds it."""

    async def release_lease(self, name: str, holder: str) -> None:
        """Give the lease back if ``holder`` still holds it."""
