"""What the public faces show: stacks, resources, events and outputs with Heat's field names."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from converge.records import EventRecord, ResourceRecord, ResourceSummary, StackRecord, built


def iso_time(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return _iso_second(int(timestamp))


@functools.lru_cache(maxsize=4096)
def _iso_second(second: int) -> str:
    # Cached: a listing of thousands of rows has a handful of distinct seconds, and
    # strftime was the largest cost of building its views.
    return dt.datetime.fromtimestamp(second, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class StackView:
    id: str
    stack_name: str
    stack_status: str
    stack_status_reason: str
    creation_time: str | None
    updated_time: str | None
    disable_rollback: bool
    timeout_mins: float | None
    drift_policy: str
    tags: list[str]
    outputs: list[dict[str, Any]]
    parameters: dict[str, Any]
    parent: str | None = None  # a nested stack: the id of the stack that owns it
    description: str = ""  # the template's

    @property
    def action(self) -> str:
        return self.stack_status.split("_", 1)[0]

    @property
    def status(self) -> str:
        return self.stack_status.split("_", 1)[1]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def of(
        record: StackRecord, parameters: Mapping[str, Any] | None = None, description: str = ""
    ) -> StackView:
        return StackView(
            id=record.id,
            stack_name=record.name,
            stack_status=record.state,
            stack_status_reason=record.status_reason,
            creation_time=iso_time(record.created_at),
            updated_time=iso_time(record.updated_at),
            disable_rollback=record.disable_rollback,
            timeout_mins=record.timeout_mins,
            drift_policy=record.drift_policy,
            tags=list(record.tags),
            outputs=[dict(value) for value in record.outputs.values()],
            parameters=dict(parameters or {}),
            parent=record.owner_id,
            description=description,
        )


@dataclass(frozen=True)
class ResourceView:
    resource_name: str
    logical_resource_id: str
    physical_resource_id: str
    resource_type: str
    resource_status: str
    resource_status_reason: str
    updated_time: str | None
    creation_time: str | None
    required_by: list[str]
    drift_status: str
    attributes: dict[str, Any]
    properties: dict[str, Any]
    id: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def of(
        record: ResourceRecord,
        required_by: list[str],
        hidden: frozenset[str] = frozenset(),
        written_type: str | None = None,
    ) -> ResourceView:
        """``written_type``: the type as the template wrote it (an alias, a template file)
        where it differs from the implementation the row records; Heat shows that one."""
        # ``built``: a listing makes one per resource, and the generated __init__ is slow.
        return built(
            ResourceView,
            {
                "resource_name": record.name,
                "logical_resource_id": record.name,
                "physical_resource_id": record.physical_resource_id or "",
                "resource_type": written_type or record.type,
                "resource_status": record.state,
                "resource_status_reason": record.status_reason,
                "updated_time": iso_time(record.updated_at or record.created_at),
                "creation_time": iso_time(record.created_at),
                "required_by": sorted(required_by),
                "drift_status": record.drift_status,
                "attributes": dict(record.attr_data),
                "properties": _masked(record.properties_data, hidden),
                "id": record.id,
            },
        )


@dataclass(frozen=True)
class ResourceSummaryView:
    """A resource in a listing: ``ResourceView`` without its attributes and properties."""

    resource_name: str
    logical_resource_id: str
    physical_resource_id: str
    resource_type: str
    resource_status: str
    resource_status_reason: str
    updated_time: str | None
    creation_time: str | None
    required_by: list[str]
    drift_status: str
    id: int

    @staticmethod
    def of(
        record: ResourceSummary, required_by: list[str], written_type: str | None = None
    ) -> ResourceSummaryView:
        """``written_type`` as for ``ResourceView.of``."""
        return built(
            ResourceSummaryView,
            {
                "resource_name": record.name,
                "logical_resource_id": record.name,
                "physical_resource_id": record.physical_resource_id or "",
                "resource_type": written_type or record.type,
                "resource_status": record.state,
                "resource_status_reason": record.status_reason,
                "updated_time": iso_time(record.updated_at or record.created_at),
                "creation_time": iso_time(record.created_at),
                "required_by": sorted(required_by),
                "drift_status": record.drift_status,
                "id": record.id,
            },
        )


def _masked(properties: Mapping[str, Any], hidden: frozenset[str]) -> dict[str, Any]:
    """The properties with hidden ones' values replaced; most types hide none."""
    if not hidden:
        return dict(properties)
    return {key: ("******" if key in hidden else value) for key, value in properties.items()}


@dataclass(frozen=True)
class DriftView:
    """A resource's last drift result; ``drift_detail``: property -> {wanted, found}."""

    resource_name: str
    resource_type: str
    physical_resource_id: str
    resource_status: str
    drift_status: str
    drift_detail: dict[str, dict[str, Any]]
    checked_time: str | None
    # detail field -> how reality differs now (a content diff), where the plugin gives one
    drift_diff: dict[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def of(record: ResourceRecord) -> DriftView:
        return DriftView(
            resource_name=record.name,
            resource_type=record.type,
            physical_resource_id=record.physical_resource_id or "",
            resource_status=record.state,
            drift_status=record.drift_status,
            drift_detail={k: dict(v) for k, v in record.drift_detail.items()},
            checked_time=iso_time(record.drift_checked_at),
        )


@dataclass(frozen=True)
class EventView:
    id: int
    event_time: str | None
    resource_name: str
    logical_resource_id: str
    physical_resource_id: str
    resource_type: str
    resource_status: str
    resource_status_reason: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def of(record: EventRecord) -> EventView:
        return EventView(
            id=record.id,
            event_time=iso_time(record.created_at),
            resource_name=record.resource_name,
            logical_resource_id=record.resource_name,
            physical_resource_id=record.physical_resource_id or "",
            resource_type=record.resource_type,
            resource_status=record.state,
            resource_status_reason=record.reason,
        )


@dataclass(frozen=True)
class PlannedChange:
    resource_name: str
    resource_type: str
    action: str  # CREATE | UPDATE | REPLACE | DELETE | NOTHING
    reason: str
    changed_properties: list[str]
    stack_name: str | None = None  # a change inside a nested stack: that stack's name
    # property -> {"old": applied (or observed), "new": wanted}; hidden ones masked
    property_changes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
