"""Following a stack operation until it settles, shown live, as plain lines, or not at all."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from converge.cli.output import event_line, styled_status
from converge.views import EventView, ResourceView, StackView

if TYPE_CHECKING:
    from converge.api import Converge

POLL_SECONDS = 0.2
# A failed create/update rolls back right after failing; how long to look for that start
# when it happens outside a worker check (a timeout fires on a timer).
ROLLBACK_GRACE_SECONDS = 0.5
# Beyond this many resources the live table lists only those in progress or failed.
_LIVE_ROWS = 15

STACK_TYPE = "OS::Heat::Stack"


class Display(Protocol):
    def resources(self, resources: Sequence[ResourceView]) -> None: ...

    def event(self, event: EventView) -> None: ...

    def close(self) -> None: ...


def counts(resources: Sequence[ResourceView]) -> tuple[int, int]:
    """(settled, total): a resource is settled once its current action completed or failed."""
    done = sum(
        1
        for r in resources
        if not r.resource_status.startswith("INIT")
        and r.resource_status.endswith(("COMPLETE", "FAILED"))
    )
    return done, len(resources)


class QuietDisplay:
    """For ``-f json``: nothing until the final document."""

    def resources(self, resources: Sequence[ResourceView]) -> None:
        pass

    def event(self, event: EventView) -> None:
        pass

    def close(self) -> None:
        pass


class LineDisplay:
    """For pipes and logs: each event once, one line each."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def resources(self, resources: Sequence[ResourceView]) -> None:
        pass

    def event(self, event: EventView) -> None:
        self._console.print(event_line(event.as_dict()))

    def close(self) -> None:
        pass


class LiveDisplay:
    """For a terminal: events scroll above a table of resources and a progress bar."""

    def __init__(self, console: Console, title: str) -> None:
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self._task = self._progress.add_task(title, total=None)
        self._table = Table()
        self._live = Live(self._render(), console=console, refresh_per_second=8)
        self._live.start()

    def _render(self) -> Group:
        return Group(self._table, self._progress)

    def resources(self, resources: Sequence[ResourceView]) -> None:
        done, total = counts(resources)
        self._progress.update(self._task, completed=done, total=total or None)
        self._table = live_table(resources)
        self._live.update(self._render())

    def event(self, event: EventView) -> None:
        self._live.console.print(event_line(event.as_dict()))

    def close(self) -> None:
        self._live.stop()


def live_table(resources: Sequence[ResourceView]) -> Table:
    """Each resource and its state; only the busy or failed ones when there are many."""
    rows = sorted(resources, key=lambda r: (r.resource_name, r.id))
    hidden = 0
    if len(rows) > _LIVE_ROWS:
        busy = [r for r in rows if r.resource_status.endswith(("IN_PROGRESS", "FAILED"))]
        hidden = len(rows) - len(busy[:_LIVE_ROWS])
        rows = busy[:_LIVE_ROWS]
    table = Table(box=None, show_header=True, header_style="dim")
    for column in ("resource", "type", "status", "reason"):
        table.add_column(column, overflow="ellipsis", no_wrap=True)
    for r in rows:
        table.add_row(
            r.resource_name,
            r.resource_type,
            styled_status(r.resource_status),
            r.resource_status_reason[:80],
        )
    if hidden:
        table.add_row(f"… {hidden} more settled", "", "", "")
    return table


@dataclass(frozen=True)
class Outcome:
    """Where the operation ended, with what was seen on the way."""

    stack: StackView
    resources: list[ResourceView]
    events: list[EventView]

    @property
    def failure_reason(self) -> str:
        """The reason the stack last failed in this operation, else its status reason."""
        for event in reversed(self.events):
            if event.resource_type == STACK_TYPE and event.resource_status.endswith("FAILED"):
                return event.resource_status_reason
        return self.stack.stack_status_reason


def may_still_roll_back(stack: StackView) -> bool:
    return (
        stack.status == "FAILED"
        and stack.action in ("CREATE", "UPDATE")
        and not stack.disable_rollback
    )


async def follow(
    cv: Converge,
    stack_id: str,
    display: Display,
    *,
    after_id: int | None = None,
    poll: float = POLL_SECONDS,
    rollback_grace: float = ROLLBACK_GRACE_SECONDS,
) -> Outcome:
    """Poll the stack until it settles, feeding new events and resource states to ``display``.

    Settled means no longer IN_PROGRESS once this process's workers are idle: a failed
    create or update that rolls back passes through FAILED for a moment first.
    """
    loop = asyncio.get_running_loop()
    seen: list[EventView] = []
    last_id = after_id
    grace_until: float | None = None
    while True:
        # The stack first: its settling is written with its events, so reading the events
        # after it never misses the last ones.
        stack = await cv.get_stack(stack_id, include_deleted=True)
        for event in await cv.list_events(stack_id, after_id=last_id):
            seen.append(event)
            last_id = event.id
            display.event(event)
        resources = await cv.list_resources(stack_id)
        display.resources(resources)
        if stack.status != "IN_PROGRESS":
            await cv.engine.idle()
            again = await cv.get_stack(stack_id, include_deleted=True)
            if again.stack_status == stack.stack_status:
                if not may_still_roll_back(again):
                    return Outcome(stack, resources, seen)
                grace_until = grace_until or loop.time() + rollback_grace
                if loop.time() >= grace_until:
                    return Outcome(stack, resources, seen)
        else:
            grace_until = None
        await asyncio.sleep(poll)
