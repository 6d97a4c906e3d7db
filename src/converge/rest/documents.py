"""Heat's JSON documents for stacks, resources, events and outputs, with their links."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from fastapi import Request

from converge.views import EventView, ResourceSummaryView, ResourceView, StackView

# What ``quote(text, safe="")`` leaves as it is (RFC 3986's unreserved characters).
_UNRESERVED = re.compile(r"[A-Za-z0-9._~-]*")


def path_segment(text: str) -> str:
    """``text`` quoted as one URL path segment; most names need no quoting, and checking
    that first costs a fraction of ``quote``, which a listing calls once per resource."""
    return text if _UNRESERVED.fullmatch(text) else quote(text, safe="")


# The fields of a stack in a listing (Heat's ``stacks_view.basic_keys``).
_SUMMARY_KEYS = (
    "id",
    "links",
    "stack_name",
    "description",
    "stack_status",
    "stack_status_reason",
    "creation_time",
    "deletion_time",
    "updated_time",
    "stack_owner",
    "parent",
    "stack_user_project_id",
    "tags",
)


def base_url(request: Request, project_id: str) -> str:
    return f"{str(request.base_url).rstrip('/')}/v1/{quote(project_id, safe='')}"


def stack_path(name: str, stack_id: str) -> str:
    return f"/stacks/{path_segment(name)}/{stack_id}"


def stack_link(request: Request, project_id: str, name: str, stack_id: str) -> dict[str, str]:
    return {"href": base_url(request, project_id) + stack_path(name, stack_id), "rel": "self"}


def stack_document(
    request: Request,
    project_id: str,
    stack: StackView,
    *,
    summary: bool = False,
) -> dict[str, Any]:
    description = stack.description
    parameters = {
        "OS::stack_id": stack.id,
        "OS::stack_name": stack.stack_name,
        "OS::project_id": project_id,
        **stack.parameters,
    }
    document: dict[str, Any] = {
        "id": stack.id,
        "links": [stack_link(request, project_id, stack.stack_name, stack.id)],
        "stack_name": stack.stack_name,
        "description": description,
        "stack_status": stack.stack_status,
        "stack_status_reason": stack.stack_status_reason,
        "creation_time": stack.creation_time,
        "deletion_time": stack.updated_time if stack.stack_status == "DELETE_COMPLETE" else None,
        "updated_time": stack.updated_time,
        "stack_owner": None,
        "parent": stack.parent,
        "stack_user_project_id": project_id,
        "tags": list(stack.tags) or None,
        "disable_rollback": stack.disable_rollback,
        "timeout_mins": stack.timeout_mins,
        "parameters": parameters,
        "outputs": [dict(output) for output in stack.outputs],
        "template_description": description,
        "capabilities": [],
        "notification_topics": [],
        "drift_policy": stack.drift_policy,
    }
    if summary:
        return {key: document[key] for key in _SUMMARY_KEYS}
    return document


def stack_url(request: Request, project_id: str, stack: StackView) -> str:
    return base_url(request, project_id) + stack_path(stack.stack_name, stack.id)


def resource_document(
    request: Request,
    project_id: str,
    stack: StackView,
    resource: ResourceView | ResourceSummaryView,
    *,
    detail: bool = False,
    nested: StackView | None = None,
    parent_resource: str | None = None,
    url: str | None = None,
) -> dict[str, Any]:
    """``url``: the stack's (``stack_url``), when the caller makes many documents;
    ``detail`` (attributes and properties) needs a ``ResourceView``."""
    url = url or stack_url(request, project_id, stack)
    links = [
        {"href": f"{url}/resources/{path_segment(resource.resource_name)}", "rel": "self"},
        {"href": url, "rel": "stack"},
    ]
    if nested is not None:
        links.append({"href": stack_url(request, project_id, nested), "rel": "nested"})
    document: dict[str, Any] = {
        "resource_name": resource.resource_name,
        "logical_resource_id": resource.logical_resource_id,
        "physical_resource_id": resource.physical_resource_id,
        "resource_status": resource.resource_status,
        "resource_status_reason": resource.resource_status_reason,
        "resource_type": resource.resource_type,
        "updated_time": resource.updated_time,
        "creation_time": resource.creation_time,
        "required_by": list(resource.required_by),
        "links": links,
        "stack_name": stack.stack_name,
        # converge's additions: the row id (a replacement has a new one) and drift.
        "id": resource.id,
        "drift_status": resource.drift_status,
    }
    if parent_resource is not None:
        document["parent_resource"] = parent_resource
    if detail:
        if not isinstance(resource, ResourceView):
            raise TypeError("a resource's details need its ResourceView, not a summary")
        document["attributes"] = dict(resource.attributes)
        document["properties"] = dict(resource.properties)
        document["description"] = ""
    return document


def event_document(
    request: Request,
    project_id: str,
    stack: StackView,
    event: EventView,
    *,
    detail: bool = False,
) -> dict[str, Any]:
    stack_url = base_url(request, project_id) + stack_path(stack.stack_name, stack.id)
    resource_url = f"{stack_url}/resources/{path_segment(event.resource_name)}"
    document: dict[str, Any] = {
        "id": str(event.id),
        "links": [
            {"href": f"{resource_url}/events/{event.id}", "rel": "self"},
            {"href": resource_url, "rel": "resource"},
            {"href": stack_url, "rel": "stack"},
        ],
        "event_time": event.event_time,
        "logical_resource_id": event.logical_resource_id,
        "resource_name": event.resource_name,
        "physical_resource_id": event.physical_resource_id,
        "resource_status": event.resource_status,
        "resource_status_reason": event.resource_status_reason,
        "resource_type": event.resource_type,
    }
    if detail:
        document["resource_properties"] = {}
    return document


def collection_links(request: Request, items: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Heat's ``next`` link: given when a page is exactly ``limit`` items long."""
    try:
        limit = int(request.query_params.get("limit") or 0)
    except ValueError:
        limit = 0
    if limit <= 0 or len(items) != limit:
        return []
    params = dict(request.query_params)
    params["marker"] = str(items[-1]["id"])
    query = "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in params.items())
    return [{"rel": "next", "href": f"{str(request.url).split('?', 1)[0]}?{query}"}]
