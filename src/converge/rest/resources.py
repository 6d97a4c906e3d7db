"""Heat's resource and event routes: list (with nested depth and filters), show, metadata,
signal (clears hooks), mark unhealthy; stack and resource events with markers."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response

from converge.api import HOOKS, Converge
from converge.errors import InvalidRequest, NotFound
from converge.rest import documents
from converge.rest.auth import Reader, Writer
from converge.rest.bodies import MarkUnhealthy
from converge.rest.errors import HeatHTTPError
from converge.rest.stacks import flag, identified, integer
from converge.views import ResourceSummaryView, ResourceView, StackView

router = APIRouter(prefix="/v1/{tenant_id}/stacks/{stack_name}/{stack_id}", tags=["resources"])

Filter = Annotated[list[str] | None, Query()]


async def _with_nested(cv: Converge, stack: StackView, depth: int) -> list[StackView]:
    """The stack, then the stacks nested in it down to ``depth`` levels."""
    return [stack, *(await cv.nested_stacks(stack.id, depth))] if depth else [stack]


def _state_matches(wanted: list[str] | None, state: str, part: str) -> bool:
    return wanted is None or state in wanted or part in wanted


# --- resources ---------------------------------------------------------------------------------


@router.get("/resources", summary="List a stack's resources")
async def list_resources(
    access: Reader,
    request: Request,
    stack_name: str,
    stack_id: str,
    nested_depth: str | None = None,
    with_detail: str | None = None,
    name: Filter = None,
    type: Filter = None,
    status: Filter = None,
    action: Filter = None,
    id: Filter = None,
    physical_resource_id: Filter = None,
) -> dict[str, Any]:
    stack = await identified(access.cv, stack_name, stack_id)
    depth = integer("nested_depth", nested_depth) or 0
    detail = flag("with_detail", with_detail)
    stacks = await _with_nested(access.cv, stack, depth)
    by_id = {s.id: s for s in stacks}
    # Without details a listing reads only the columns it shows: a fraction of the cost.
    read = access.cv.list_resources if detail else access.cv.list_resource_summaries
    listed: dict[str, Sequence[ResourceView | ResourceSummaryView]] = {
        s.id: await read(s.id) for s in stacks
    }
    # A nested stack's id is the physical id of the resource that made it.
    made_by = {
        resource.physical_resource_id: resource.resource_name
        for resources in listed.values()
        for resource in resources
        if resource.physical_resource_id in by_id
    }
    items: list[dict[str, Any]] = []
    for current in stacks:
        url = documents.stack_url(request, access.project_id, current)
        for resource in listed[current.id]:
            action_part, _, status_part = resource.resource_status.partition("_")
            if not (
                (name is None or resource.resource_name in name)
                and (type is None or resource.resource_type in type)
                and _state_matches(status, resource.resource_status, status_part)
                and _state_matches(action, resource.resource_status, action_part)
                and (id is None or str(resource.id) in id)
                and (
                    physical_resource_id is None
                    or resource.physical_resource_id in physical_resource_id
                )
            ):
                continue
            items.append(
                documents.resource_document(
                    request,
                    access.project_id,
                    current,
                    resource,
                    detail=detail,
                    nested=by_id.get(resource.physical_resource_id),
                    parent_resource=made_by.get(current.id),
                    url=url,
                )
            )
    return {"resources": items}


@router.get("/resources/{resource_name}", summary="Show a resource with all its attributes")
async def show_resource(
    access: Reader,
    request: Request,
    stack_name: str,
    stack_id: str,
    resource_name: str,
    with_attr: Filter = None,
) -> dict[str, Any]:
    stack = await identified(access.cv, stack_name, stack_id)
    resource = await access.cv.get_resource(stack.id, resource_name)
    document = documents.resource_document(request, access.project_id, stack, resource, detail=True)
    for attribute in with_attr or []:
        document["attributes"].setdefault(attribute, None)
    return {"resource": document}


@router.get("/resources/{resource_name}/metadata", summary="A resource's metadata")
async def resource_metadata(
    access: Reader, stack_name: str, stack_id: str, resource_name: str
) -> dict[str, Any]:
    stack = await identified(access.cv, stack_name, stack_id, include_deleted=False)
    return {"metadata": await access.cv.resource_metadata(stack.id, resource_name)}


@router.post(
    "/resources/{resource_name}/signal",
    summary='Signal a resource: {"unset_hook": "pre-create"} clears a breakpoint',
)
async def signal_resource(
    access: Writer,
    stack_name: str,
    stack_id: str,
    resource_name: str,
    body: Annotated[dict[str, Any] | None, Body(examples=[{"unset_hook": "pre-create"}])] = None,
) -> Response:
    stack = await identified(access.cv, stack_name, stack_id, include_deleted=False)
    resource = await access.cv.get_resource(stack.id, resource_name)
    hook = (body or {}).get("unset_hook")
    if hook is None:
        raise HeatHTTPError(
            400,
            "ResourceActionNotSupported",
            f"Signal resource during {resource.resource_status.split('_')[0]} is not "
            f"supported: {resource_name} ({resource.resource_type}) takes no signals; "
            f'{{"unset_hook": HOOK}} clears a breakpoint ({", ".join(HOOKS)})',
        )
    if not isinstance(hook, str):
        raise InvalidRequest("unset_hook must be the name of a hook, e.g. pre-create")
    await access.cv.clear_hook(stack.id, resource_name, hook)
    return Response(status_code=200)


@router.patch(
    "/resources/{resource_name}",
    summary="Mark a resource unhealthy (CHECK_FAILED: the next update replaces it) or healthy",
)
async def mark_unhealthy(
    access: Writer, stack_name: str, stack_id: str, resource_name: str, body: MarkUnhealthy
) -> Response:
    stack = await identified(access.cv, stack_name, stack_id, include_deleted=False)
    await access.cv.mark_unhealthy(
        stack.id, resource_name, body.mark_unhealthy, body.resource_status_reason
    )
    return Response(status_code=200)


# --- events ------------------------------------------------------------------------------------


async def _events(
    access: Reader,
    request: Request,
    stack_name: str,
    stack_id: str,
    resource_name: str | None,
    limit: str | None,
    marker: str | None,
    sort_dir: str | None,
    nested_depth: str | None,
    resource_status: list[str] | None,
    resource_action: list[str] | None,
    resource_type: list[str] | None,
    resource_names: list[str] | None,
) -> list[dict[str, Any]]:
    stack = await identified(access.cv, stack_name, stack_id)
    page_size = integer("limit", limit)
    depth = integer("nested_depth", nested_depth) or 0
    direction = (sort_dir or "asc").lower()
    if direction not in ("asc", "desc"):
        raise InvalidRequest(f'invalid sort direction "{sort_dir}": use asc or desc')
    after: int | None = None
    if marker is not None:
        after = integer("marker", marker)
    rows: list[tuple[StackView, Any]] = []
    for current in await _with_nested(access.cv, stack, depth):
        for event in await access.cv.list_events(current.id, resource_name=resource_name):
            action_part, _, status_part = event.resource_status.partition("_")
            if (
                _state_matches(resource_status, event.resource_status, status_part)
                and _state_matches(resource_action, event.resource_status, action_part)
                and (resource_type is None or event.resource_type in resource_type)
                and (resource_names is None or event.resource_name in resource_names)
            ):
                rows.append((current, event))
    rows.sort(key=lambda row: row[1].id, reverse=direction == "desc")
    if after is not None:
        ids = [event.id for _, event in rows]
        if after not in ids:
            raise NotFound(f"the marker event {after} is not among this stack's events")
        rows = rows[ids.index(after) + 1 :]
    if page_size is not None:
        rows = rows[:page_size]
    return [
        documents.event_document(request, access.project_id, owner, event) for owner, event in rows
    ]


@router.get("/events", summary="List a stack's events")
async def stack_events(
    access: Reader,
    request: Request,
    stack_name: str,
    stack_id: str,
    limit: str | None = None,
    marker: str | None = None,
    sort_dir: str | None = None,
    sort_keys: Filter = None,
    nested_depth: str | None = None,
    resource_status: Filter = None,
    resource_action: Filter = None,
    resource_type: Filter = None,
    resource_name: Filter = None,
) -> dict[str, Any]:
    events = await _events(
        access, request, stack_name, stack_id, None, limit, marker, sort_dir, nested_depth,
        resource_status, resource_action, resource_type, resource_name,
    )  # fmt: skip
    return {"events": events}


@router.get("/resources/{resource_name}/events", summary="List a resource's events")
async def resource_events(
    access: Reader,
    request: Request,
    stack_name: str,
    stack_id: str,
    resource_name: str,
    limit: str | None = None,
    marker: str | None = None,
    sort_dir: str | None = None,
    sort_keys: Filter = None,
    nested_depth: str | None = None,
    resource_status: Filter = None,
    resource_action: Filter = None,
    resource_type: Filter = None,
) -> dict[str, Any]:
    events = await _events(
        access, request, stack_name, stack_id, resource_name, limit, marker, sort_dir, None,
        resource_status, resource_action, resource_type, None,
    )  # fmt: skip
    if not events and marker is None:
        raise NotFound(f"No events found for resource {resource_name}")
    return {"events": events}


@router.get("/resources/{resource_name}/events/{event_id}", summary="Show one event")
async def show_event(
    access: Reader,
    request: Request,
    stack_name: str,
    stack_id: str,
    resource_name: str,
    event_id: str,
) -> dict[str, Any]:
    stack = await identified(access.cv, stack_name, stack_id)
    for event in await access.cv.list_events(stack.id, resource_name=resource_name):
        if str(event.id) == event_id:
            return {
                "event": documents.event_document(
                    request, access.project_id, stack, event, detail=True
                )
            }
    raise NotFound(f"No event {event_id} found")
