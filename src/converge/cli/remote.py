"""The CLI against a server: ``converge --url URL --token T …`` (or ``CONVERGE_URL`` and
``CONVERGE_TOKEN``) runs the commands through the REST API instead of a local state file.

``RemoteConverge`` answers the calls the commands make on ``converge.api.Converge`` with the
same views, and ``follow_remote`` shows an operation's progress from the server's change
stream (Server-Sent Events), so the output is the same in both modes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import click
import httpx

from converge.cli.progress import (
    STACK_TYPE,
    Display,
    OperationProgress,
    Outcome,
    QuietDisplay,
    may_still_roll_back,
)
from converge.errors import (
    Conflict,
    ConvergeError,
    InvalidRequest,
    NotFound,
    TemplateError,
    Unavailable,
)
from converge.views import DriftView, EventView, PlannedChange, ResourceView, StackView

# How long a failed create/update is watched for the start of its rollback.
ROLLBACK_GRACE_SECONDS = 2.0
_TIMEOUT = httpx.Timeout(30.0, read=None)


@dataclass(frozen=True)
class Remote:
    """Where the server is and how to authenticate (from the group's options)."""

    url: str
    token: str | None
    project: str | None


def remote_settings() -> Remote | None:
    """The ``--url``/``--token``/``--project`` of the running ``converge`` command, if any."""
    context = click.get_current_context(silent=True)
    if context is None:
        return None
    root = context.find_root()
    settings = root.obj if isinstance(root.obj, Remote) else None
    return settings


class RemoteConverge:
    """The Python API's reading and operating calls, over Heat's REST API."""

    def __init__(self, client: httpx.AsyncClient, base: str, project: str) -> None:
        self._client = client
        self._base = base  # http://HOST:PORT
        self.project_id = project

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, remote: Remote) -> AsyncIterator[RemoteConverge]:
        headers = {"X-Auth-Token": remote.token} if remote.token else {}
        base = remote.url.rstrip("/")
        async with httpx.AsyncClient(headers=headers, timeout=_TIMEOUT) as client:
            project = remote.project
            if project is None:
                who = await _request(client, "GET", f"{base}/v1/converge/token")
                project = who.get("project_id")
                if not project:
                    raise InvalidRequest(
                        "the server does not say which project to use: pass --project "
                        "(or CONVERGE_PROJECT)"
                    )
            yield cls(client, base, str(project))

    # --- plumbing ----------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return f"{self._base}/v1/{quote(self.project_id, safe='')}{path}"

    async def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        return await _request(self._client, method, self._url(path), **kwargs)

    async def _stack_path(self, name_or_id: str, *, include_deleted: bool = False) -> str:
        stack = await self.get_stack(name_or_id, include_deleted=include_deleted)
        return f"/stacks/{quote(stack.stack_name, safe='')}/{stack.id}"

    # --- reading -----------------------------------------------------------------------

    async def get_stack(self, name_or_id: str, *, include_deleted: bool = False) -> StackView:
        # The lookup redirects to /stacks/NAME/ID; httpx follows it.
        document = await self._call(
            "GET", f"/stacks/{quote(name_or_id, safe='')}", follow_redirects=True
        )
        stack = _stack_view(document["stack"])
        if stack.stack_status == "DELETE_COMPLETE" and not include_deleted:
            raise NotFound(f"stack {name_or_id!r} not found")
        return stack

    async def list_stacks(self, *, show_nested: bool = False) -> list[StackView]:
        params = {"sort_keys": "creation_time", "sort_dir": "asc"}
        if show_nested:
            params["show_nested"] = "true"
        listed = await self._call("GET", "/stacks", params=params)
        # A listing has the summary fields only; each stack's document has the rest.
        return [await self.get_stack(item["id"], include_deleted=True) for item in listed["stacks"]]

    async def list_resources(self, name_or_id: str) -> list[ResourceView]:
        path = await self._stack_path(name_or_id, include_deleted=True)
        listed = await self._call("GET", f"{path}/resources", params={"with_detail": "true"})
        return [_resource_view(item) for item in listed["resources"]]

    async def list_events(
        self, name_or_id: str, *, resource_name: str | None = None, after_id: int | None = None
    ) -> list[EventView]:
        path = await self._stack_path(name_or_id, include_deleted=True)
        if resource_name is not None:
            path += f"/resources/{quote(resource_name, safe='')}"
        params = {"marker": str(after_id)} if after_id is not None else {}
        try:
            listed = await self._call("GET", f"{path}/events", params=params)
        except NotFound:
            if resource_name is None:
                raise
            return []  # Heat answers 404 for a resource without events
        return [_event_view(item) for item in listed["events"]]

    async def outputs(self, name_or_id: str) -> list[dict[str, Any]]:
        stack = await self.get_stack(name_or_id)
        return [dict(output) for output in stack.outputs]

    async def drift(self, name_or_id: str, *, diffs: bool = False) -> list[DriftView]:
        document = await self._call(
            "GET",
            f"/converge/stacks/{quote(name_or_id, safe='')}/drift",
            params={"diff": "true"} if diffs else {},
        )
        return [DriftView(**item) for item in document["drift"]]

    # --- operations --------------------------------------------------------------------

    async def create_stack(
        self,
        name: str,
        template: Any,
        *,
        environments: Sequence[Any] = (),
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        disable_rollback: bool = False,
        timeout_mins: float | None = None,
        drift_policy: str = "notify",
        tags: Sequence[str] = (),
        wait: bool = True,
    ) -> StackView:
        body = _inputs_body(template, environments, files, parameters)
        body.update(
            stack_name=name,
            disable_rollback=disable_rollback,
            drift_policy=drift_policy,
            tags=list(tags),
        )
        if timeout_mins is not None:
            body["timeout_mins"] = max(1, round(timeout_mins))
        created = await self._call("POST", "/stacks", json=body)
        return await self._settle(created["stack"]["id"], None, wait)

    async def update_stack(
        self,
        name_or_id: str,
        template: Any = None,
        *,
        environments: Sequence[Any] | None = None,
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        existing: bool = False,
        disable_rollback: bool | None = None,
        timeout_mins: float | None = None,
        drift_policy: str | None = None,
        converge: bool = False,
        wait: bool = True,
    ) -> StackView:
        path = await self._stack_path(name_or_id)
        after = await self._last_event_id(name_or_id)
        body = _inputs_body(template, environments or (), files, parameters)
        body["converge"] = converge
        if disable_rollback is not None:
            body["disable_rollback"] = disable_rollback
        if timeout_mins is not None:
            body["timeout_mins"] = max(1, round(timeout_mins))
        if drift_policy is not None:
            body["drift_policy"] = drift_policy
        await self._call("PATCH" if existing else "PUT", path, json=body)
        return await self._settle(path.rsplit("/", 1)[1], after, wait)

    async def delete_stack(self, name_or_id: str, *, wait: bool = True) -> StackView:
        stack = await self.get_stack(name_or_id)
        after = await self._last_event_id(stack.id)
        await self._call("DELETE", f"/stacks/{quote(stack.stack_name, safe='')}/{stack.id}")
        return await self._settle(stack.id, after, wait)

    async def check_stack(self, name_or_id: str, *, wait: bool = True) -> StackView:
        stack = await self.get_stack(name_or_id)
        after = await self._last_event_id(stack.id)
        path = f"/stacks/{quote(stack.stack_name, safe='')}/{stack.id}"
        await self._call("POST", f"{path}/actions", json={"check": None})
        return await self._settle(stack.id, after, wait)

    async def _last_event_id(self, name_or_id: str) -> int | None:
        events = await self.list_events(name_or_id)
        return events[-1].id if events else None

    async def _settle(self, stack_id: str, after: int | None, wait: bool) -> StackView:
        """The stack now, or (``wait``) once the operation whose events follow ``after``
        settles, as the change stream tells."""
        if not wait:
            return await self.get_stack(stack_id, include_deleted=True)
        return (await follow_remote(self, stack_id, QuietDisplay(), after_id=after)).stack

    def operation(self, stack_id: str) -> None:
        """The embedded API's handle on the operation a call started. Heat's REST API does
        not say which traversal a request started, so through a server ``apply`` reports
        the state the stack settles in (a newer operation's, if one superseded it)."""
        return None

    async def clear_hook(self, name_or_id: str, resource_name: str, hook: str) -> None:
        path = await self._stack_path(name_or_id)
        await self._call(
            "POST",
            f"{path}/resources/{quote(resource_name, safe='')}/signal",
            json={"unset_hook": hook},
        )

    async def plan(
        self,
        name: str,
        template: Any,
        *,
        environments: Sequence[Any] = (),
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        converge: bool = False,
    ) -> list[PlannedChange]:
        if converge:
            # Heat's preview has no such option, so the server cannot be asked for it.
            raise InvalidRequest(
                "plan --converge looks at reality from this machine's engine; it is not "
                "available through a server (run it where the state is, or plan without it)"
            )
        body = _inputs_body(template, environments, files, parameters)
        try:
            path = await self._stack_path(name)
        except NotFound:
            preview = await self._call("POST", "/stacks/preview", json={**body, "stack_name": name})
            return [
                PlannedChange(r["resource_name"], r["resource_type"], "CREATE", "new resource", [])
                for r in preview["stack"]["resources"]
            ]
        groups = (await self._call("PUT", f"{path}/preview", json=body))["resource_changes"]
        return [
            PlannedChange(
                change["resource_name"],
                change["resource_type"],
                change.get("resource_action", ""),
                change.get("reason", ""),
                list(change.get("changed_properties", [])),
            )
            for changes in groups.values()
            for change in changes
        ]

    async def stream(self, stack_id: str, after_id: int | None) -> AsyncIterator[EventView]:
        """The stack's events from the change stream, after ``after_id`` (all if None)."""
        params = {"stack": stack_id, "after": str(after_id or 0)}
        async with self._client.stream(
            "GET", self._url("/converge/events/stream"), params=params
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                _raise_for(response)
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    data = json.loads(line[6:])
                    yield _event_view(data)


async def follow_remote(
    cv: RemoteConverge,
    stack_id: str,
    display: Display,
    *,
    after_id: int | None = None,
    rollback_grace: float = ROLLBACK_GRACE_SECONDS,
) -> Outcome:
    """Show the operation's events live from the change stream until the stack settles."""
    seen: list[EventView] = []
    events = cv.stream(stack_id, after_id).__aiter__()
    waiting_for_rollback = False
    progress: OperationProgress | None = None
    while True:
        try:
            event = await asyncio.wait_for(
                events.__anext__(), rollback_grace if waiting_for_rollback else None
            )
        except (TimeoutError, StopAsyncIteration):
            break
        seen.append(event)
        if progress is None:
            stack = await cv.get_stack(stack_id, include_deleted=True)
            progress = OperationProgress(stack.stack_name)
        progress.add(event)
        display.event(event)
        resources = await cv.list_resources(stack_id)
        display.resources(progress.rows(resources, settled=False))
        if event.resource_type != STACK_TYPE or event.resource_status.endswith("IN_PROGRESS"):
            waiting_for_rollback = False
            continue
        stack = await cv.get_stack(stack_id, include_deleted=True)
        waiting_for_rollback = may_still_roll_back(stack)
        if not waiting_for_rollback and not stack.stack_status.endswith("IN_PROGRESS"):
            break
    await events.aclose()  # type: ignore[attr-defined]
    stack = await cv.get_stack(stack_id, include_deleted=True)
    return Outcome(stack, await cv.list_resources(stack_id), seen)


# --- documents to views -------------------------------------------------------------------


def _stack_view(document: Mapping[str, Any]) -> StackView:
    return StackView(
        id=document["id"],
        stack_name=document["stack_name"],
        stack_status=document["stack_status"],
        stack_status_reason=document.get("stack_status_reason") or "",
        creation_time=document.get("creation_time"),
        updated_time=document.get("updated_time"),
        disable_rollback=bool(document.get("disable_rollback")),
        timeout_mins=document.get("timeout_mins"),
        drift_policy=document.get("drift_policy") or "notify",
        tags=list(document.get("tags") or []),
        outputs=[dict(output) for output in document.get("outputs") or []],
        parameters={
            key: value
            for key, value in (document.get("parameters") or {}).items()
            if not key.startswith("OS::")
        },
        parent=document.get("parent"),
    )


def _resource_view(document: Mapping[str, Any]) -> ResourceView:
    return ResourceView(
        resource_name=document["resource_name"],
        logical_resource_id=document.get("logical_resource_id") or document["resource_name"],
        physical_resource_id=document.get("physical_resource_id") or "",
        resource_type=document.get("resource_type") or "",
        resource_status=document["resource_status"],
        resource_status_reason=document.get("resource_status_reason") or "",
        updated_time=document.get("updated_time"),
        creation_time=document.get("creation_time"),
        required_by=list(document.get("required_by") or []),
        drift_status=document.get("drift_status") or "NOT_CHECKED",
        attributes=dict(document.get("attributes") or {}),
        properties=dict(document.get("properties") or {}),
        id=int(document.get("id") or 0),
    )


def _event_view(document: Mapping[str, Any]) -> EventView:
    return EventView(
        id=int(document["id"]),
        event_time=document.get("event_time"),
        resource_name=document["resource_name"],
        logical_resource_id=document.get("logical_resource_id") or document["resource_name"],
        physical_resource_id=document.get("physical_resource_id") or "",
        resource_type=document.get("resource_type") or "",
        resource_status=document["resource_status"],
        resource_status_reason=document.get("resource_status_reason") or "",
    )


def _inputs_body(
    template: Any,
    environments: Sequence[Any],
    files: Mapping[str, str] | None,
    parameters: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """Heat's body: the template as text, each environment as a file in ``files``."""
    all_files = dict(files or {})
    body: dict[str, Any] = {"files": all_files, "parameters": dict(parameters or {})}
    if template is not None:
        body["template"] = getattr(template, "text", template)
    names: list[str] = []
    for index, environment in enumerate(environments):
        name = getattr(environment, "filename", None) or f"environment-{index + 1}.yaml"
        all_files[name] = getattr(environment, "text", environment)
        names.append(name)
    if names:
        body["environment_files"] = names
    return body


# --- HTTP and errors ----------------------------------------------------------------------


async def _request(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> Any:
    try:
        response = await client.request(method, url, **kwargs)
    except httpx.TransportError as exc:  # refused, unreachable, timed out: try again later
        raise Unavailable(f"cannot reach the converge server at {url}: {exc}") from exc
    except httpx.HTTPError as exc:
        raise ConvergeError(f"the converge server at {url} answered badly: {exc}") from exc
    if response.status_code >= 400:
        _raise_for(response)
    if not response.content:
        return {}
    return response.json()


def _raise_for(response: httpx.Response) -> None:
    """The server's Heat error body as converge's own error, so the CLI says it the one way."""
    try:
        error = response.json()["error"]
        message, kind = str(error.get("message")), str(error.get("type"))
    except (ValueError, KeyError, TypeError):
        message, kind = response.text[:200] or response.reason_phrase, ""
    status = response.status_code
    if kind == "StackValidationFailed":
        raise TemplateError(message)
    if status == 404:
        raise NotFound(message)
    if status == 409:
        raise Conflict(message)
    if status in (401, 403):
        raise InvalidRequest(f"the server refused the request ({status}): {message}")
    if status < 500:
        raise InvalidRequest(message)
    if status == 503:  # its database or broker is away for now
        raise Unavailable(f"the server is unavailable ({status}): {message}")
    raise ConvergeError(f"the server failed ({status}): {message}")
