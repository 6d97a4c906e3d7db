"""Plain records that cross the store port: what the engine reads and writes, no ORM objects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple, TypeVar

from converge.core.states import Action, Status
from converge.core.traversal import GraphNode

T = TypeVar("T")


def built(cls: type[T], values: dict[str, Any]) -> T:
    """The frozen dataclass ``cls`` holding ``values``, which name every one of its fields.

    What ``cls(**values)`` makes, at about a third of the cost: a frozen dataclass's
    generated ``__init__`` sets each field through ``object.__setattr__``, and that was
    most of the time spent listing a stack of a thousand resources. No defaults are
    filled in, so a missing or unknown field is a ``TypeError``, as in ``__init__``.
    """
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(f.name for f in fields(cls))  # type: ignore[arg-type]
    if values.keys() != names:
        raise TypeError(
            f"{cls.__name__}: missing {sorted(names - values.keys())}, "
            f"unknown {sorted(values.keys() - names)}"
        )
    instance = object.__new__(cls)
    instance.__dict__.update(values)
    return instance


_FIELD_NAMES: dict[type, frozenset[str]] = {}


@dataclass(frozen=True)
class TemplateRecord:
    id: int
    stack_id: str
    template: Mapping[str, Any]
    environment: Mapping[str, Any]
    files: Mapping[str, str]
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class NewTemplate:
    """A template stored together with a new stack, in the stack's own transaction."""

    template: Mapping[str, Any]
    environment: Mapping[str, Any]
    files: Mapping[str, str]
    parameters: Mapping[str, Any]


@dataclass(frozen=True)
class StackRecord:
    id: str
    name: str
    project_id: str
    action: Action
    status: Status
    status_reason: str
    raw_template_id: int | None
    prev_raw_template_id: int | None
    current_traversal: str
    disable_rollback: bool
    timeout_mins: float | None
    drift_policy: str
    atomic_key: int
    created_at: float
    updated_at: float | None
    deadline: float | None  # wall-clock time the current operation times out
    outputs: Mapping[str, Any] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    deleted: bool = False
    # The current traversal compares with observed reality; a heal names its resources.
    converge: bool = False
    converge_names: tuple[str, ...] | None = None
    owner_id: str | None = None  # a nested stack: the stack whose resource made it

    @property
    def state(self) -> str:
        # Concatenation, not an f-string: formatting a StrEnum goes through its
        # __format__, and listings ask every row for its state.
        return self.action + "_" + self.status


@dataclass(frozen=True)
class ResourceRecord:
    id: int
    stack_id: str
    name: str
    type: str
    action: Action
    status: Status
    status_reason: str
    physical_resource_id: str | None
    current_template_id: int | None
    requires: frozenset[int]
    replaces: int | None
    replaced_by: int | None
    engine_id: str | None
    atomic_key: int
    properties_data: Mapping[str, Any]
    plugin_data: Mapping[str, Any]
    attr_data: Mapping[str, Any]
    deletion_policy: str
    hook_pending: Mapping[str, Any] | None  # {"hook": ..., "traversal": ..., "is_update": ...}
    cleared_hooks: tuple[str, ...]  # "traversal:hook" markers
    created_at: float
    updated_at: float | None
    drift_status: str = "NOT_CHECKED"
    drift_detail: Mapping[str, Any] = field(default_factory=dict)
    heal_attempts: int = 0
    heal_last_at: float | None = None
    heal_next_at: float | None = None
    drift_checked_at: float | None = None
    host: str | None = None  # the machine it lives on (types bound to their host)

    @property
    def state(self) -> str:
        # Concatenation, not an f-string: formatting a StrEnum goes through its
        # __format__, and listings ask every row for its state.
        return self.action + "_" + self.status


class ResourceSummary(NamedTuple):
    """What a listing shows of a resource row: none of its JSON documents (properties,
    attributes, plugin data), whose decoding is most of the cost of a full record. A
    tuple: a listing makes thousands, and a frozen dataclass costs several times more."""

    id: int
    name: str
    type: str
    action: str
    status: str
    status_reason: str
    physical_resource_id: str | None
    requires: frozenset[int]
    created_at: float
    updated_at: float | None
    drift_status: str

    @property
    def state(self) -> str:
        return self.action + "_" + self.status


@dataclass(frozen=True)
class EventRecord:
    id: int
    stack_id: str
    resource_name: str
    physical_resource_id: str | None
    resource_type: str
    action: str
    status: str
    reason: str
    created_at: float

    @property
    def state(self) -> str:
        return f"{self.action}_{self.status}"


@dataclass(frozen=True)
class NewEvent:
    resource_name: str
    resource_type: str
    action: str
    status: str
    reason: str
    physical_resource_id: str | None = None


@dataclass(frozen=True)
class NewResource:
    name: str
    type: str
    deletion_policy: str = "Delete"
    replaces: int | None = None
    current_template_id: int | None = None
    requires: frozenset[int] = frozenset()
    # The machine the real thing lives on, for types bound to their host (else None).
    host: str | None = None


@dataclass(frozen=True)
class Report:
    """What a graph node told one of its successors through the sync point."""

    sender_resource_id: int
    sender_is_update: bool
    data: Mapping[str, Any]


class CheckInputs(NamedTuple):
    """What a worker reads before checking a node (``Store.load_for_check``): the stack,
    the node's resource row (None: gone) and the reports its predecessors sent it."""

    stack: StackRecord
    row: ResourceRecord | None
    reports: list[Report]


class ClaimAhead(NamedTuple):
    """A claim of the row of ``load_next`` that a finish may make along with its own
    writes (``Store.finish_node``'s ``claim_next``): the row's compare-and-swap (its id,
    the key it was read with, the claim's columns) and the claim's events."""

    resource_id: int
    expected_key: int
    changes: Mapping[str, Any]
    events: Sequence[NewEvent]


class FinishedNode(NamedTuple):
    """What ``Store.finish_node`` did. ``stored``: False when the row changed under the
    caller (nothing written); ``ready``: the successors this report made ready;
    ``current_traversal``: the stack's, as the finish saw it; ``next_check``: the inputs
    of the successor the caller asked to be read with the finish (``load_next``), or None
    when the store did not read them (the caller then loads them as usual), its row as
    it was before any claim; ``claimed_next``: that row as the finish claimed it
    (``claim_next``), or None when it did not; ``ahead``: the row the caller asked to be
    read with the finish (``read_ahead``), or None."""

    stored: bool
    ready: list[GraphNode]
    current_traversal: str
    next_check: CheckInputs | None = None
    claimed_next: ResourceRecord | None = None
    ahead: ResourceRecord | None = None


@dataclass(frozen=True)
class ServiceRecord:
    engine_id: str
    host: str
    pid: int
    roles: tuple[str, ...]
    started_at: float
    heartbeat_at: float
    # "<boot id>:<start ticks>" of the process (None where /proc cannot tell): with the
    # host and pid, it tells a dead engine of this host from a live one at once.
    process_start: str | None = None
