"""What the worker reads from and writes to a resource row: the state the decision looks
at, hook markers, events, the provider template's digest, the row as it will read after a
change, and values made storable as JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge.core.decide import MISSING, Decision, ResourceState, decide_converging
from converge.core.drift import DriftStatus
from converge.core.states import Action, Status
from converge.core.template import ResourceDefinition
from converge.core.traversal import GraphNode, TraversalGraph
from converge.records import NewEvent, ResourceRecord, StackRecord
from converge.resources.base import ResourcePlugin

# What a resource's drift columns say once a traversal made its reality match.
_IN_SYNC: Mapping[str, Any] = {"drift_status": str(DriftStatus.IN_SYNC), "drift_detail": {}}


def _kept_after_delete(row: ResourceRecord) -> dict[str, Any]:
    """What a row becomes instead of being deleted when a newer traversal started
    meanwhile: that one may have chosen the row (a resource removed, then added back), and
    needs it to say the real thing is gone."""
    if row.action == Action.INIT:
        return {"engine_id": None}  # nothing real was ever made
    return {
        "action": Action.DELETE,
        "status": Status.COMPLETE,
        "status_reason": "deleted by an operation a newer one superseded",
        "physical_resource_id": None,
        "attr_data": {},
        "engine_id": None,
        "hook_pending": None,
    }


def _nothing_real(row: ResourceRecord) -> bool:
    """Never made, or already deleted: only the row is left to drop."""
    return row.action == Action.INIT or (
        row.action == Action.DELETE and row.status == Status.COMPLETE
    )


def _is_known_to(graph: TraversalGraph, resource_id: int) -> bool:
    return GraphNode(resource_id, True) in graph or GraphNode(resource_id, False) in graph


def _is_left_alone_by_heal(stack: StackRecord, row: ResourceRecord) -> bool:
    """A heal converges its drifted resources; one given up on (FAILED) stays as it is."""
    return (
        stack.converge_names is not None
        and row.name not in stack.converge_names
        and row.status == Status.FAILED
    )


def _hidden_properties(plugin: ResourcePlugin) -> frozenset[str]:
    return frozenset(name for name, prop in plugin.properties_schema.items() if prop.hidden)


def resource_state(row: ResourceRecord) -> ResourceState:
    """The parts of a stored row that the update decision looks at."""
    return ResourceState(
        action=row.action,
        status=row.status,
        type=row.type,
        properties=row.properties_data,
        current_template_id=row.current_template_id,
        has_physical_resource=row.physical_resource_id is not None,
    )


def _is_paused(row: ResourceRecord, traversal_id: str) -> bool:
    pending = row.hook_pending
    return bool(pending) and pending.get("traversal") == traversal_id  # type: ignore[union-attr]


def _is_cleared(row: ResourceRecord, traversal_id: str, hook: str) -> bool:
    return f"{traversal_id}:{hook}" in row.cleared_hooks


def _hook_marker(hook: str, traversal_id: str, node: GraphNode) -> dict[str, Any]:
    return {"hook": hook, "traversal": traversal_id, "node": node.encode()}


def _event(
    row: ResourceRecord, action: Action, status: Status, reason: str, physical_id: Any
) -> NewEvent:
    return NewEvent(
        resource_name=row.name,
        resource_type=row.type,
        action=str(action),
        status=str(status),
        reason=reason,
        physical_resource_id=_text(physical_id),
    )


_TEMPLATE_DIGEST = "template_digest"


def _with_template_digest(data: Mapping[str, Any], resource: ResourceDefinition) -> dict[str, Any]:
    """A provider template resource remembers which text of its template it applied."""
    if resource.provider_digest is None:
        return dict(data)
    return {**data, _TEMPLATE_DIGEST: resource.provider_digest}


def converging_decision(
    row: ResourceRecord,
    resource: ResourceDefinition,
    plugin: ResourcePlugin,
    properties: Mapping[str, Any],
    *,
    observed: Any = MISSING,
    drifted: bool | None = None,
) -> Decision:
    """What converging the row towards ``resource`` takes (``decide_converging``), with
    what the row and the plugin say: the update phase and ``plan`` decide alike."""
    return decide_converging(
        resource_state(row),
        resource.implementation_type,
        properties,
        plugin.properties_schema,
        open_properties=plugin.open_properties,
        never_updates=plugin.never_updates,
        observed=observed,
        drifted=drifted,
        converges_inside=plugin.converges_inside,
        template_changed=template_changed(row, resource),
    )


def template_changed(row: ResourceRecord, resource: ResourceDefinition) -> bool:
    """The provider template's text differs from the one last applied (Heat updates the
    nested stack then, even when the resource's properties are the same)."""
    if resource.provider_digest is None or row.physical_resource_id is None:
        return False
    return row.plugin_data.get(_TEMPLATE_DIGEST) != resource.provider_digest


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _with(row: ResourceRecord, changes: Mapping[str, Any]) -> ResourceRecord:
    """The row as it will read after ``changes`` (for the report payload)."""
    from dataclasses import replace

    fields = {k: v for k, v in changes.items() if k in row.__dataclass_fields__}
    if "requires" in fields:
        fields["requires"] = frozenset(fields["requires"])
    return replace(row, **fields)


def _jsonable_value(value: Any) -> Any:
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable_value(v) for v in value]
    return str(value)


def _jsonable(values: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): _jsonable_value(v) for k, v in values.items()}
