"""converge's own routes beside Heat's: a stack's drift, the synchronizer's snapshot of a
type, and the change stream (Server-Sent Events) of the project's events.

The stream's ids are the ``event`` table's ids. A client that reconnects with
``Last-Event-ID`` (or ``?after=``) gets every event after that id, so it never misses one;
a new client without either starts at the newest event.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request
from fastapi.responses import StreamingResponse

from converge.api import FeedEvent
from converge.rest.auth import Access, Reader
from converge.rest.stacks import integer
from converge.views import EventView

router = APIRouter(prefix="/v1/{tenant_id}/converge", tags=["converge"])

STACK_TYPE = "OS::Heat::Stack"
POLL_SECONDS = 0.02  # how often an idle stream looks for new events
KEEPALIVE_SECONDS = 15.0  # a comment line, so proxies and clients see the stream alive


@router.get("/stacks/{stack_name}/drift", summary="Each resource's drift as last recorded")
async def stack_drift(access: Reader, stack_name: str, diff: bool = False) -> dict[str, Any]:
    """``?diff=true``: modified resources are observed again for a content diff."""
    stack = await access.cv.get_stack(stack_name, include_deleted=True)
    views = await access.cv.drift(stack.id, diffs=diff)
    return {
        "stack_id": stack.id,
        "stack_name": stack.stack_name,
        "drift": [view.as_dict() for view in views],
    }


@router.get(
    "/snapshot/{type_name}",
    summary="The synchronizer's get_all of a type: this project's entities and the sequence "
    "number the snapshot is consistent with",
)
async def snapshot(access: Reader, type_name: str) -> dict[str, Any]:
    taken = await access.cv.snapshot(type_name)
    return {
        "type": type_name,
        "seq": taken.seqs.get(type_name, 0),
        "entities": [
            {
                "physical_id": entity.physical_id,
                "hash": entity.hash,
                "essence": dict(entity.essence),
                "seq": entity.seq,
                "last_seen": entity.last_seen,
                "stack_id": entity.stack_id,
                "resource_name": entity.resource_name,
            }
            for entity in taken.entities
        ],
    }


def kind_of(event: EventView) -> str:
    """``stack``, ``drift`` (found or resolved) or ``resource`` (a status change)."""
    if event.resource_type == STACK_TYPE:
        return "stack"
    if event.resource_status_reason.startswith("Drift"):
        return "drift"
    return "resource"


def sse_message(item: FeedEvent) -> str:
    event = EventView.of(item.event)
    data = {
        **event.as_dict(),
        "stack_id": item.event.stack_id,
        "stack_name": item.stack_name,
        "timestamp": item.event.created_at,  # event_time to the microsecond (Unix time)
    }
    return f"id: {event.id}\nevent: {kind_of(event)}\ndata: {json.dumps(data)}\n\n"


@router.get(
    "/events/stream",
    summary="Server-Sent Events: stack events, resource status changes and drift, resumable",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}},
)
async def event_stream(
    access: Reader,
    request: Request,
    stack: str | None = None,
    after: str | None = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """``stack`` limits the stream to one stack (name or id); ``after`` or the
    ``Last-Event-ID`` header resumes after that event id."""
    stack_id = (await access.cv.get_stack(stack, include_deleted=True)).id if stack else None
    start = integer("Last-Event-ID", last_event_id) if last_event_id else integer("after", after)
    if start is None:
        start = await access.cv.last_event_id()
    return StreamingResponse(
        _stream(access, request, stack_id, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _stream(
    access: Access, request: Request, stack_id: str | None, after: int
) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    quiet_since = loop.time()
    yield f": converge change stream after {after}\n\n"
    reader = access.cv.event_reader(after, stack_id=stack_id)
    while not await request.is_disconnected():
        batch = await reader.next()
        for item in batch:
            yield sse_message(item)
        if batch:
            quiet_since = loop.time()
            continue
        if loop.time() - quiet_since > KEEPALIVE_SECONDS:
            quiet_since = loop.time()
            yield ": keepalive\n\n"
        await asyncio.sleep(POLL_SECONDS)
