"""The baseline of observed entities and the pure comparison of an observation with it.

Purely computational: no database, clock or I/O. The store runs ``compare`` against the
rows it read and writes only what it returns.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple


class ChangeKind(StrEnum):
    APPEARED = "appeared"
    CHANGED = "changed"
    GONE = "gone"


@dataclass(frozen=True)
class Owner:
    """The stack resource that manages an entity (entities without one are unmanaged)."""

    stack_id: str
    resource_id: int
    resource_name: str


@dataclass(frozen=True)
class ManagedEntity:
    """A resource row of a live stack with a physical id: what a sampler observes."""

    type: str
    physical_id: str
    owner: Owner
    stack_name: str
    properties: Mapping[str, Any]
    plugin_data: Mapping[str, Any]


# Observation and BaselineEntry are named tuples, not dataclasses: a pass makes one per
# entity, and at 100,000 entities a frozen dataclass's slower construction shows.
class Observation(NamedTuple):
    """One entity as a sampler saw it: its essence, the essence's hash, its owner."""

    essence: Mapping[str, Any]
    hash: str
    owner: Owner | None


class BaselineEntry(NamedTuple):
    """What the baseline holds about one entity (the essence itself is not needed to compare)."""

    hash: str
    stack_id: str | None
    resource_id: int | None
    resource_name: str | None = None
    observed_at: float = 0.0


@dataclass(frozen=True)
class EntityChange:
    """A difference between an observation and the baseline, with the state it replaces.

    ``expected`` is the baseline entry the change was computed against (None: no entry):
    the store writes the change only if the entry is still exactly that (compare-and-swap).
    """

    physical_id: str
    kind: ChangeKind
    expected: BaselineEntry | None
    observation: Observation | None  # None when gone


@dataclass(frozen=True)
class EntityState:
    """One entity of a snapshot: the baseline row, essence included."""

    type: str
    physical_id: str
    hash: str
    essence: Mapping[str, Any]
    seq: int  # the type's sequence number at this entity's last change
    last_seen: float
    stack_id: str | None = None
    resource_id: int | None = None
    resource_name: str | None = None

    @property
    def is_managed(self) -> bool:
        return self.stack_id is not None


@dataclass(frozen=True)
class Snapshot:
    """Every entity of one type (or all types), consistent with the sequence numbers given.

    ``seqs`` maps each type to its sequence number; the snapshot holds exactly the changes
    numbered up to it. ``seq`` is that number for a one-type snapshot, and the sum over the
    types for an all-types one (it grows with every change, but compare per type:
    ``seq_of``).
    """

    entities: list[EntityState]
    seqs: Mapping[str, int] = field(default_factory=dict)

    @property
    def seq(self) -> int:
        return sum(self.seqs.values())

    def seq_of(self, type_name: str) -> int:
        """The sequence number of ``type_name`` this snapshot is consistent with (0: none)."""
        return self.seqs.get(type_name, 0)


def essence_hash(essence: Mapping[str, Any]) -> str:
    """sha256 of a stable JSON form: equal essences give equal hashes, key order aside."""
    return hashlib.sha256(_ENCODER.encode(essence).encode()).hexdigest()


def _stable(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return value.hex()
    return repr(value)


# One encoder for every hash: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=_stable)


def observation(essence: Mapping[str, Any], owner: Owner | None) -> Observation:
    return Observation(essence, essence_hash(essence), owner)


def is_same(entry: BaselineEntry, seen: Observation) -> bool:
    """Whether an observation leaves a baseline entry as it is (hash and owner)."""
    owner = seen.owner
    return (
        entry.hash == seen.hash
        and entry.stack_id == (owner.stack_id if owner else None)
        and entry.resource_id == (owner.resource_id if owner else None)
    )


def compare(
    baseline: Mapping[str, BaselineEntry],
    observed: Mapping[str, Observation],
    *,
    complete: bool,
    gone: Iterable[str] = (),
) -> list[EntityChange]:
    """The changes that turn ``baseline`` into what was observed.

    ``complete``: the observation covers every entity of the type, so an entity of the
    baseline missing from it is gone. ``gone`` names entities known to be gone otherwise
    (``observe`` answered None). An owner change counts as a change: consumers see which
    stack manages what without reading the store.
    """
    changes: list[EntityChange] = []
    for physical_id, seen in observed.items():
        entry = baseline.get(physical_id)
        if entry is None:
            changes.append(EntityChange(physical_id, ChangeKind.APPEARED, None, seen))
        elif not is_same(entry, seen):
            changes.append(EntityChange(physical_id, ChangeKind.CHANGED, entry, seen))
    missing: Iterable[str] = baseline.keys() - observed.keys() if complete else ()
    for physical_id in sorted({*missing, *gone}):
        entry = baseline.get(physical_id)
        if entry is not None and physical_id not in observed:
            changes.append(EntityChange(physical_id, ChangeKind.GONE, entry, None))
    return changes
