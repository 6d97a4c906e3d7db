"""Heat's stack routes: create, list, look up, show, update, PATCH, previews, delete, abandon,
the stored template, environment and files, outputs, and the stack actions."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Body, Query, Request, Response
from fastapi.responses import RedirectResponse

from converge.api import Converge, TemplateInput
from converge.errors import InvalidRequest, NotFound
from converge.rest import documents
from converge.rest.auth import Reader, Writer
from converge.rest.bodies import StackCreate, StackUpdate
from converge.rest.errors import HeatHTTPError, not_supported
from converge.rest.inputs import environments_of, has_environment, tags_of, template_of
from converge.views import PlannedChange, StackView

router = APIRouter(prefix="/v1/{tenant_id}", tags=["stacks"])

_SORT_KEYS = {
    "stack_name": lambda s: s.stack_name,
    "stack_status": lambda s: s.stack_status,
    "creation_time": lambda s: s.creation_time or "",
    "updated_time": lambda s: s.updated_time or "",
}
_PREVIEW_GROUPS = {
    "CREATE": "added",
    "DELETE": "deleted",
    "REPLACE": "replaced",
    "UPDATE": "updated",
    "NOTHING": "unchanged",
}
# Subpaths a stack name alone may be followed by; they redirect to the stack's own URL.
_LOOKUP_SUBPATHS = ("resources", "events", "template", "environment", "files", "outputs")


def flag(name: str, value: str | None, default: bool = False) -> bool:
    """Heat's boolean query parameters: true/false, yes/no, 1/0, on/off."""
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "yes", "1", "on", "t", "y"):
        return True
    if lowered in ("false", "no", "0", "off", "f", "n"):
        return False
    raise InvalidRequest(
        f'unrecognized value "{value}" for "{name}", acceptable values are: true, false'
    )


def integer(name: str, value: str | None, *, minimum: int = 0) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise InvalidRequest(
            f'invalid value "{value}" for "{name}": an integer is expected'
        ) from None
    if number < minimum:
        raise InvalidRequest(f'invalid value "{value}" for "{name}": it must be {minimum} or more')
    return number


async def identified(
    cv: Converge, stack_name: str, stack_id: str, *, include_deleted: bool = True
) -> StackView:
    """The stack a ``/stacks/{name}/{id}`` URL names: 404 unless both agree."""
    stack = await cv.get_stack(stack_id, include_deleted=include_deleted)
    if stack.id != stack_id or stack.stack_name != stack_name:
        raise NotFound(f"the stack {stack_name}/{stack_id} could not be found")
    return stack


# --- collection ------------------------------------------------------------------------------


@router.get("/stacks", summary="List stacks")
async def list_stacks(
    access: Reader,
    request: Request,
    limit: str | None = None,
    marker: str | None = None,
    sort_keys: Annotated[list[str] | None, Query()] = None,
    sort_dir: str | None = None,
    show_nested: str | None = None,
    show_deleted: str | None = None,
    show_hidden: str | None = None,
    with_count: str | None = None,
    tags: str | None = None,
    tags_any: str | None = None,
    not_tags: str | None = None,
    not_tags_any: str | None = None,
    id: Annotated[list[str] | None, Query()] = None,
    name: Annotated[list[str] | None, Query()] = None,
    stack_name: Annotated[list[str] | None, Query()] = None,
    status: Annotated[list[str] | None, Query()] = None,
    stack_status: Annotated[list[str] | None, Query()] = None,
    action: Annotated[list[str] | None, Query()] = None,
    owner_id: Annotated[list[str] | None, Query()] = None,
    parent: Annotated[list[str] | None, Query()] = None,
    tenant: Annotated[list[str] | None, Query()] = None,
) -> dict[str, Any]:
    page_size = integer("limit", limit)
    direction = (sort_dir or "desc").lower()
    if direction not in ("asc", "desc"):
        raise InvalidRequest(f'invalid sort direction "{sort_dir}": use asc or desc')
    keys = sort_keys or ["creation_time"]
    for key in keys:
        if key not in _SORT_KEYS:
            raise InvalidRequest(
                f'invalid sort key "{key}": use one of {", ".join(sorted(_SORT_KEYS))}'
            )
    flag("show_hidden", show_hidden)
    stacks = await access.cv.list_stacks(
        show_nested=flag("show_nested", show_nested),
        include_deleted=flag("show_deleted", show_deleted),
    )

    def matches(stack: StackView) -> bool:
        checks: list[tuple[list[str] | None, set[str]]] = [
            (id, {stack.id}),
            (name, {stack.stack_name}),
            (stack_name, {stack.stack_name}),
            (status, {stack.status, stack.stack_status}),
            (stack_status, {stack.stack_status}),
            (action, {stack.action}),
            (owner_id, {stack.parent or ""}),
            (parent, {stack.parent or ""}),
            (tenant, {access.project_id}),
        ]
        if any(wanted is not None and not set(wanted) & have for wanted, have in checks):
            return False
        have_tags = set(stack.tags)
        if tags and not set(tags_of(tags)) <= have_tags:
            return False
        if tags_any and not set(tags_of(tags_any)) & have_tags:
            return False
        if not_tags and set(tags_of(not_tags)) <= have_tags:
            return False
        return not (not_tags_any and set(tags_of(not_tags_any)) & have_tags)

    selected = [stack for stack in stacks if matches(stack)]
    selected.sort(key=lambda s: tuple(_SORT_KEYS[k](s) for k in keys), reverse=direction == "desc")
    count = len(selected)
    if marker is not None:
        ids = [stack.id for stack in selected]
        if marker in ids:
            selected = selected[ids.index(marker) + 1 :]
    if page_size is not None:
        selected = selected[:page_size]
    items = [
        documents.stack_document(request, access.project_id, stack, summary=True)
        for stack in selected
    ]
    result: dict[str, Any] = {"stacks": items}
    links = documents.collection_links(request, items)
    if links:
        result["links"] = links
    if flag("with_count", with_count):
        result["count"] = count
    return result


@router.post("/stacks", status_code=201, summary="Create a stack")
async def create_stack(
    access: Writer, request: Request, response: Response, body: StackCreate
) -> dict[str, Any]:
    if body.adopt_stack_data is not None:
        raise not_supported("Stack Adopt")
    if body.converge is not None:
        raise InvalidRequest(
            "converge flag only supported in stack update (or update preview) request."
        )
    name, template = _name_and_template(body)
    await access.cv.require_workers()
    stack = await access.cv.create_stack(
        name,
        template,
        environments=environments_of(body),
        files=body.files,
        parameters=body.parameters,
        # Heat's default: a failed create is left as it is unless rollback is asked for.
        disable_rollback=True if body.disable_rollback is None else body.disable_rollback,
        timeout_mins=body.timeout_mins,
        drift_policy=body.drift_policy or "notify",
        tags=tags_of(body.tags),
        wait=False,
    )
    link = documents.stack_link(request, access.project_id, stack.stack_name, stack.id)
    response.headers["Location"] = link["href"]
    return {"stack": {"id": stack.id, "links": [link]}}


def _name_and_template(body: StackCreate) -> tuple[str, TemplateInput]:
    if not body.stack_name:
        raise InvalidRequest("No stack name specified")
    template = template_of(body)
    if template is None:
        raise InvalidRequest("No template specified")
    return body.stack_name, template


@router.post("/stacks/preview", summary="Preview a stack create")
async def preview_stack(access: Reader, request: Request, body: StackCreate) -> dict[str, Any]:
    name, template = _name_and_template(body)
    try:
        await access.cv.get_stack(name)
    except NotFound:
        pass
    else:
        raise HeatHTTPError(409, "StackExists", f"The Stack ({name}) already exists.")
    environments = environments_of(body)
    validated = await access.cv.validate(
        template, environments=environments, files=body.files, parameters=body.parameters
    )
    changes = await access.cv.plan(
        name, template, environments=environments, files=body.files, parameters=body.parameters
    )
    return {
        "stack": {
            "id": "None",
            "stack_name": name,
            "description": validated["Description"],
            "template_description": validated["Description"],
            "parameters": {
                k: v.get("Value", v.get("Default")) for k, v in validated["Parameters"].items()
            },
            "disable_rollback": True if body.disable_rollback is None else body.disable_rollback,
            "timeout_mins": body.timeout_mins,
            "tags": tags_of(body.tags) or None,
            "resources": [
                {
                    "resource_name": change.resource_name,
                    "resource_type": change.resource_type,
                    "resource_action": "INIT",
                    "resource_status": "COMPLETE",
                    "stack_name": name,
                    "required_by": [],
                }
                for change in changes
            ],
            "links": [],
        }
    }


# --- one stack ---------------------------------------------------------------------------------


async def lookup(access: Reader, request: Request, stack_name: str) -> RedirectResponse:
    """Find a stack by name or id: redirects to its URL (the client repeats its request
    there)."""
    return await _redirect(access.cv, request, access.project_id, stack_name, "")


# As Heat's lookup: every method, one operation each in the OpenAPI description.
for _method in ("GET", "POST", "PUT", "PATCH", "DELETE"):
    router.add_api_route(
        "/stacks/{stack_name}",
        lookup,
        methods=[_method],
        status_code=302,
        response_class=RedirectResponse,
        summary="Find a stack by name or id: redirects to its URL",
        name=f"lookup_{_method.lower()}",
        operation_id=f"lookup_stack_{_method.lower()}",
    )


async def _redirect(
    cv: Converge, request: Request, project_id: str, stack_name: str, subpath: str
) -> RedirectResponse:
    try:
        stack = await cv.get_stack(stack_name)
    except NotFound:
        # As Heat: by id, a deleted stack is still found (DELETE_COMPLETE); by name, not.
        stack = await cv.get_stack(stack_name, include_deleted=True)
        if stack.id != stack_name:
            raise
    location = documents.base_url(request, project_id) + documents.stack_path(
        stack.stack_name, stack.id
    )
    if subpath:
        location += f"/{subpath}"
    if request.query_params:
        location += "?" + urlencode(list(request.query_params.multi_items()))
    return RedirectResponse(location, status_code=302)


def _lookup_route(subpath: str) -> None:
    async def lookup_subpath(access: Reader, request: Request, stack_name: str) -> RedirectResponse:
        return await _redirect(access.cv, request, access.project_id, stack_name, subpath)

    router.add_api_route(
        f"/stacks/{{stack_name}}/{subpath}",
        lookup_subpath,
        methods=["GET"],
        status_code=302,
        response_class=RedirectResponse,
        summary=f"Find a stack by name or id: redirects to its {subpath}",
        name=f"lookup_{subpath}",
    )


for _subpath in _LOOKUP_SUBPATHS:
    _lookup_route(_subpath)


@router.post(
    "/stacks/{stack_name}/actions",
    status_code=302,
    response_class=RedirectResponse,
    summary="Find a stack by name or id: redirects to its actions",
)
async def lookup_actions(access: Reader, request: Request, stack_name: str) -> RedirectResponse:
    return await _redirect(access.cv, request, access.project_id, stack_name, "actions")


@router.get("/stacks/{stack_name}/{stack_id}", summary="Show a stack")
async def show_stack(
    access: Reader,
    request: Request,
    stack_name: str,
    stack_id: str,
    resolve_outputs: str | None = None,
) -> dict[str, Any]:
    stack = await identified(access.cv, stack_name, stack_id)
    document = documents.stack_document(request, access.project_id, stack)
    if not flag("resolve_outputs", resolve_outputs, default=True):
        document.pop("outputs")
    return {"stack": document}


@router.get("/stacks/{stack_name}/{stack_id}/template", summary="The stack's template")
async def stack_template(access: Reader, stack_name: str, stack_id: str) -> dict[str, Any]:
    await identified(access.cv, stack_name, stack_id, include_deleted=False)
    return dict((await access.cv.stored_inputs(stack_id)).template)


@router.get("/stacks/{stack_name}/{stack_id}/environment", summary="The stack's environment")
async def stack_environment(access: Reader, stack_name: str, stack_id: str) -> dict[str, Any]:
    await identified(access.cv, stack_name, stack_id, include_deleted=False)
    stored = await access.cv.stored_inputs(stack_id)
    environment = dict(stored.environment)
    environment["parameters"] = {**environment.get("parameters", {}), **stored.parameters}
    return environment


@router.get("/stacks/{stack_name}/{stack_id}/files", summary="The stack's files")
async def stack_files(access: Reader, stack_name: str, stack_id: str) -> dict[str, Any]:
    await identified(access.cv, stack_name, stack_id, include_deleted=False)
    return dict((await access.cv.stored_inputs(stack_id)).files)


@router.put("/stacks/{stack_name}/{stack_id}", status_code=202, summary="Update a stack")
async def update_stack(
    access: Writer, stack_name: str, stack_id: str, body: StackUpdate
) -> Response:
    await _update(access.cv, stack_name, stack_id, body, patch=False)
    return Response(status_code=202)


@router.patch(
    "/stacks/{stack_name}/{stack_id}",
    status_code=202,
    summary="Update a stack, keeping what the request leaves out",
)
async def patch_stack(
    access: Writer, stack_name: str, stack_id: str, body: StackUpdate
) -> Response:
    await _update(access.cv, stack_name, stack_id, body, patch=True)
    return Response(status_code=202)


async def _update(
    cv: Converge, stack_name: str, stack_id: str, body: StackUpdate, *, patch: bool
) -> None:
    await identified(cv, stack_name, stack_id, include_deleted=False)
    template = template_of(body)
    if template is None and not patch:
        raise InvalidRequest("No template specified")
    if body.clear_parameters and not patch:
        raise InvalidRequest("clear_parameters is only supported in a PATCH update")
    await cv.require_workers()
    await cv.update_stack(
        stack_id,
        template,
        environments=environments_of(body) if has_environment(body) or not patch else None,
        files=body.files,
        parameters=body.parameters,
        existing=patch,
        disable_rollback=body.disable_rollback,
        timeout_mins=body.timeout_mins,
        drift_policy=body.drift_policy,
        converge=body.converge,
        clear_parameters=body.clear_parameters,
        wait=False,
    )


@router.put("/stacks/{stack_name}/{stack_id}/preview", summary="Preview a stack update")
async def preview_update(
    access: Reader,
    stack_name: str,
    stack_id: str,
    body: StackUpdate,
    show_nested: str | None = None,
) -> dict[str, Any]:
    nested = flag("show_nested", show_nested)
    return await _preview_update(access.cv, stack_name, stack_id, body, patch=False, nested=nested)


@router.patch("/stacks/{stack_name}/{stack_id}/preview", summary="Preview a PATCH update")
async def preview_patch(
    access: Reader,
    stack_name: str,
    stack_id: str,
    body: StackUpdate,
    show_nested: str | None = None,
) -> dict[str, Any]:
    nested = flag("show_nested", show_nested)
    return await _preview_update(access.cv, stack_name, stack_id, body, patch=True, nested=nested)


async def _preview_update(
    cv: Converge,
    stack_name: str,
    stack_id: str,
    body: StackUpdate,
    *,
    patch: bool,
    nested: bool = False,
) -> dict[str, Any]:
    """What the update would do, by Heat's groups; with ``nested``, also the changes inside
    nested stacks (each naming its stack)."""
    await identified(cv, stack_name, stack_id, include_deleted=False)
    stored = await cv.stored_inputs(stack_id)
    template: TemplateInput | None = template_of(body)
    environments: list[TemplateInput] = environments_of(body)
    files = dict(body.files)
    parameters = dict(body.parameters)
    if patch:
        template = template if template is not None else dict(stored.template)
        if not has_environment(body):
            environments = [dict(stored.environment)]
        files = {**stored.files, **files}
        parameters = {**stored.parameters, **parameters}
        for name in body.clear_parameters:
            parameters.pop(name, None)
    if template is None:
        raise InvalidRequest("No template specified")
    changes = await cv.plan(
        stack_name,
        template,
        environments=environments,
        files=files,
        parameters=parameters,
        show_nested=nested,
    )
    groups: dict[str, list[dict[str, Any]]] = {group: [] for group in _PREVIEW_GROUPS.values()}
    for change in changes:
        groups[_PREVIEW_GROUPS[change.action]].append(_change_document(stack_name, change))
    return {"resource_changes": groups}


def _change_document(stack_name: str, change: PlannedChange) -> dict[str, Any]:
    return {
        "resource_name": change.resource_name,
        "resource_type": change.resource_type,
        "stack_name": change.stack_name or stack_name,
        "resource_action": change.action,
        "reason": change.reason,
        "changed_properties": list(change.changed_properties),
    }


@router.delete("/stacks/{stack_name}/{stack_id}", status_code=204, summary="Delete a stack")
async def delete_stack(access: Writer, stack_name: str, stack_id: str) -> Response:
    await identified(access.cv, stack_name, stack_id, include_deleted=False)
    await access.cv.require_workers()
    await access.cv.delete_stack(stack_id, wait=False)
    return Response(status_code=204)


@router.delete("/stacks/{stack_name}/{stack_id}/abandon", summary="Abandon a stack (not enabled)")
async def abandon_stack(access: Writer, stack_name: str, stack_id: str) -> dict[str, Any]:
    await identified(access.cv, stack_name, stack_id, include_deleted=False)
    raise not_supported("Stack Abandon")


@router.get("/stacks/{stack_name}/{stack_id}/export", summary="Export a stack (not enabled)")
async def export_stack(access: Reader, stack_name: str, stack_id: str) -> dict[str, Any]:
    await identified(access.cv, stack_name, stack_id, include_deleted=False)
    raise not_supported("Stack Export")


# --- outputs -----------------------------------------------------------------------------------


@router.get("/stacks/{stack_name}/{stack_id}/outputs", summary="List a stack's outputs")
async def list_outputs(access: Reader, stack_name: str, stack_id: str) -> dict[str, Any]:
    stack = await identified(access.cv, stack_name, stack_id, include_deleted=False)
    return {
        "outputs": [
            {"output_key": output["output_key"], "description": output.get("description", "")}
            for output in stack.outputs
        ]
    }


@router.get("/stacks/{stack_name}/{stack_id}/outputs/{output_key}", summary="Show one output")
async def show_output(
    access: Reader, stack_name: str, stack_id: str, output_key: str
) -> dict[str, Any]:
    stack = await identified(access.cv, stack_name, stack_id, include_deleted=False)
    for output in stack.outputs:
        if output["output_key"] == output_key:
            return {"output": dict(output)}
    raise NotFound(f"Specified output key {output_key} not found.")


# --- actions -----------------------------------------------------------------------------------

_ACTIONS = ("suspend", "resume", "check", "cancel_update", "cancel_without_rollback")


@router.post(
    "/stacks/{stack_name}/{stack_id}/actions",
    status_code=202,
    summary="Run an action: check, cancel_update, cancel_without_rollback (suspend and "
    "resume are refused as not supported)",
)
async def stack_action(
    access: Writer,
    stack_name: str,
    stack_id: str,
    body: Annotated[dict[str, Any], Body(examples=[{"check": None}])],
) -> Response:
    stack = await identified(access.cv, stack_name, stack_id, include_deleted=False)
    if len(body) != 1:
        raise InvalidRequest("Multiple actions specified" if body else "No action specified")
    (action,) = body
    if action not in _ACTIONS:
        raise InvalidRequest(f"Invalid action {action} specified")
    if action in ("suspend", "resume"):
        raise not_supported(
            f"Stack {action}",
            " converge's resource types have no paused state; delete or update instead.",
        )
    await access.cv.require_workers()
    if action == "check":
        await access.cv.check_stack(stack.id, wait=False)
    else:
        await access.cv.cancel_update(stack.id, rollback=action == "cancel_update", wait=False)
    return Response(status_code=202)
