"""Rows and records: a row read becomes a record, a record to write becomes a row.

The hot paths (``sqlite_hot.py``, ``postgres_hot.py``) give back rows with the attributes
of SQLAlchemy's, so every path makes its records here, with the same code.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import sqlalchemy as sa

from converge.adapters.sql import tables
from converge.core.states import Action, Status
from converge.errors import NotFound
from converge.records import (
    EventRecord,
    NewEvent,
    NewResource,
    ResourceRecord,
    StackRecord,
    built,
)


def stack_found(row: Any | None, name: str) -> StackRecord:
    if row is None:
        raise NotFound(f"stack {name} not found")
    return stack_record(row)


def stack_record(row: Any) -> StackRecord:
    return StackRecord(
        id=row.id,
        name=row.name,
        project_id=row.project_id,
        action=_action(row.action),
        status=_status(row.status),
        status_reason=row.status_reason or "",
        raw_template_id=row.raw_template_id,
        prev_raw_template_id=row.prev_raw_template_id,
        current_traversal=row.current_traversal or "",
        disable_rollback=bool(row.disable_rollback),
        timeout_mins=row.timeout_mins,
        drift_policy=row.drift_policy,
        atomic_key=row.atomic_key,
        created_at=row.created_at,
        updated_at=row.updated_at,
        deadline=row.deadline,
        outputs=row.outputs or {},
        tags=tuple(row.tags or ()),
        deleted=bool(row.deleted_marker),
        converge=bool(row.converge),
        converge_names=None if row.converge_names is None else tuple(row.converge_names),
        owner_id=row.owner_id,
    )


def resource_record(row: Any) -> ResourceRecord:
    # ``built``: listings make thousands of these, and the generated __init__ is slow.
    return built(
        ResourceRecord,
        dict(
            id=row.id,
            stack_id=row.stack_id,
            name=row.name,
            type=row.type,
            action=_action(row.action),
            status=_status(row.status),
            status_reason=row.status_reason or "",
            physical_resource_id=row.physical_resource_id,
            current_template_id=row.current_template_id,
            requires=frozenset(row.requires or ()),
            replaces=row.replaces,
            replaced_by=row.replaced_by,
            engine_id=row.engine_id,
            atomic_key=row.atomic_key,
            properties_data=row.properties_data or {},
            plugin_data=row.plugin_data or {},
            attr_data=row.attr_data or {},
            deletion_policy=row.deletion_policy,
            hook_pending=row.hook_pending,
            cleared_hooks=tuple(row.cleared_hooks or ()),
            created_at=row.created_at,
            updated_at=row.updated_at,
            drift_status=row.drift_status,
            drift_detail=row.drift_detail or {},
            heal_attempts=row.heal_attempts or 0,
            heal_last_at=row.heal_last_at,
            heal_next_at=row.heal_next_at,
            drift_checked_at=row.drift_checked_at,
            host=row.host,
        ),
    )


def event_record(row: Any) -> EventRecord:
    """An event row (or a row with an event's columns) as its record."""
    return EventRecord(
        id=row.id,
        stack_id=row.stack_id,
        resource_name=row.resource_name,
        physical_resource_id=row.physical_resource_id,
        resource_type=row.resource_type,
        action=row.action,
        status=row.status,
        reason=row.reason,
        created_at=row.created_at,
    )


def merged(row: ResourceRecord, changes: Mapping[str, Any], atomic_key: int) -> ResourceRecord:
    """``row`` as it reads after ``changes`` were written (typed as ``resource_record``)."""
    fields = dict(changes, atomic_key=atomic_key)
    if "action" in fields:
        fields["action"] = Action(fields["action"])
    if "status" in fields:
        fields["status"] = Status(fields["status"])
    if "requires" in fields:
        fields["requires"] = frozenset(fields["requires"])
    if "cleared_hooks" in fields:
        fields["cleared_hooks"] = tuple(fields["cleared_hooks"])
    return dataclasses.replace(row, **fields)


# Stored text to enum by a dict: ``Action(text)`` costs several times more, and a listing of
# a big stack converts two per row. An unknown text still fails in the enum's own call.
_ACTIONS: dict[str, Action] = {action.value: action for action in Action}
_STATUSES: dict[str, Status] = {status.value: status for status in Status}


def _action(text: str) -> Action:
    return _ACTIONS.get(text) or Action(text)


def _status(text: str) -> Status:
    return _STATUSES.get(text) or Status(text)


def column_value(value: Any) -> Any:
    if isinstance(value, frozenset | set):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Action | Status):
        return str(value)
    return value


def new_resource_row(stack_id: str, new: NewResource, now: float) -> dict[str, Any]:
    return {
        "stack_id": stack_id,
        "name": new.name,
        "type": new.type,
        "action": str(Action.INIT),
        "status": str(Status.COMPLETE),
        "status_reason": "",
        "physical_resource_id": None,
        "current_template_id": new.current_template_id,
        "requires": sorted(new.requires),
        "replaces": new.replaces,
        "replaced_by": None,
        "engine_id": None,
        "atomic_key": 0,
        "properties_data": {},
        "plugin_data": {},
        "attr_data": {},
        "deletion_policy": new.deletion_policy,
        "host": new.host,
        "hook_pending": None,
        "cleared_hooks": [],
        "drift_status": "NOT_CHECKED",
        "drift_detail": None,
        "heal_attempts": 0,
        "created_at": now,
        "updated_at": None,
    }


# Columns a new row leaves to their default (NULL): ``written_resource_record`` reads them.
_UNSET_RESOURCE_COLUMNS = dict.fromkeys(c.name for c in tables.resource.c)


def written_resource_record(row: Mapping[str, Any]) -> ResourceRecord:
    """The record of a row as ``new_resource_row`` (with its id) wrote it: what reading it
    back gives."""
    return resource_record(SimpleNamespace(**{**_UNSET_RESOURCE_COLUMNS, **row}))


def event_rows(stack_id: str, events: Sequence[NewEvent], now: float) -> list[dict[str, Any]]:
    return [
        {
            "stack_id": stack_id,
            "resource_name": event.resource_name,
            "physical_resource_id": event.physical_resource_id,
            "resource_type": event.resource_type,
            "action": event.action,
            "status": event.status,
            "reason": event.reason,
            "created_at": now,
        }
        for event in events
    ]


def inserted_id(result: sa.CursorResult[Any]) -> int:
    key = result.inserted_primary_key
    assert key is not None  # a single-row insert into a table with a primary key
    return int(key[0])
