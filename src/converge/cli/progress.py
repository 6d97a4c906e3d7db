"""Following a stack operation until it settles, shown live, as plain lines, or not at all."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import click
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
from rich.text import Text

from converge.cli.output import event_line, styled_status
from converge.errors import StateError, StoreError
from converge.views import EventView, ResourceView, StackView

if TYPE_CHECKING:
    from converge.api import Converge

POLL_SECONDS = 0.2
# How long following waits out a database it cannot reach (a server restarting) before it
# gives up: the operation goes on in the workers either way.
DATABASE_PATIENCE_SECONDS = 120.0
# A failed create/update rolls back right after failing; how long to look for that start
# when it happens outside a worker check (a timeout fires on a timer).
ROLLBACK_GRACE_SECONDS = 0.5
# Beyond this many resources the live table lists only those in progress or failed.
_LIVE_ROWS = 15

STACK_TYPE = "OS::Heat::Stack"


class Display(Protocol):
    def resources(self, rows: Sequence[ProgressRow]) -> None: ...

    def event(self, event: EventView) -> None: ...

    def close(self) -> None: ...


_PAUSED = re.compile(r"paused until Hook (\S+) is cleared")
WAITING = "WAITING"
PAUSED = "PAUSED"


@dataclass(frozen=True)
class ProgressRow:
    """A resource as this operation has left it so far."""

    name: str
    type: str
    status: str  # a Heat state, WAITING (not reached yet) or PAUSED (at a hook)
    reason: str

    @property
    def is_done(self) -> bool:
        # A CHECK event of a converging update is a look, not the resource's action.
        return self.status.endswith(("COMPLETE", "FAILED")) and not self.status.startswith("CHECK")

    @property
    def is_busy(self) -> bool:
        return not self.is_done and self.status != WAITING


def resume_hint(stack_name: str, resource_name: str, hook: str) -> str:
    return f"converge hook clear {stack_name} {resource_name} {hook}"


def paused_hook(event: EventView) -> str | None:
    """The hook a resource is paused at, when the event says it paused."""
    found = _PAUSED.search(event.resource_status_reason)
    return found.group(1) if found else None


class OperationProgress:
    """Each resource's state in this operation, from this operation's events only.

    A resource's row keeps the state of the previous operation until this one reaches
    it: counting rows would count old work as done (an update read 7/8 after a second).
    """

    def __init__(self, stack_name: str) -> None:
        self.stack_name = stack_name
        self._last: dict[str, EventView] = {}

    def add(self, event: EventView) -> None:
        if event.resource_type != STACK_TYPE:
            self._last[event.resource_name] = event

    def rows(self, resources: Sequence[ResourceView], *, settled: bool) -> list[ProgressRow]:
        newest: dict[str, ResourceView] = {}
        for resource in sorted(resources, key=lambda r: r.id):
            newest[resource.resource_name] = resource
        rows = []
        for name, resource in sorted(newest.items()):
            event = self._last.get(name)
            if event is None:
                # Untouched by this operation: still to come, or (once settled) unchanged.
                status = resource.resource_status if settled else WAITING
                reason = "" if settled else "not started yet"
            elif (hook := paused_hook(event)) is not None and not settled:
                status = PAUSED
                reason = f"at {hook}: {resume_hint(self.stack_name, name, hook)}"
            else:
                status, reason = event.resource_status, event.resource_status_reason
            rows.append(ProgressRow(name, resource.resource_type, status, reason))
        return rows


def counts(rows: Sequence[ProgressRow]) -> tuple[int, int]:
    """(done, total) in this operation."""
    return sum(1 for row in rows if row.is_done), len(rows)


class QuietDisplay:
    """For ``-f json``: nothing until the final document."""

    def resources(self, rows: Sequence[ProgressRow]) -> None:
        pass

    def event(self, event: EventView) -> None:
        pass

    def close(self) -> None:
        pass


def _hint_line(stack_name: str, event: EventView) -> str | None:
    hook = paused_hook(event)
    if hook is None:
        return None
    return f"  to resume: {resume_hint(stack_name, event.resource_name, hook)}"


class LineDisplay:
    """For pipes and logs: each event once, one line each."""

    def __init__(self, console: Console, stack_name: str) -> None:
        self._console = console
        self._stack_name = stack_name

    def resources(self, rows: Sequence[ProgressRow]) -> None:
        pass

    def event(self, event: EventView) -> None:
        self._console.print(event_line(event.as_dict()))
        if hint := _hint_line(self._stack_name, event):
            self._console.print(hint)

    def close(self) -> None:
        pass


class LiveDisplay:
    """For a terminal: events scroll above a table of resources and a progress bar."""

    def __init__(self, console: Console, title: str, stack_name: str) -> None:
        self._stack_name = stack_name
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

    def resources(self, rows: Sequence[ProgressRow]) -> None:
        done, total = counts(rows)
        self._progress.update(self._task, completed=done, total=total or None)
        self._table = live_table(rows)
        self._live.update(self._render())

    def event(self, event: EventView) -> None:
        self._live.console.print(event_line(event.as_dict()))
        if hint := _hint_line(self._stack_name, event):
            self._live.console.print(hint)

    def close(self) -> None:
        self._live.stop()


def live_table(rows: Sequence[ProgressRow]) -> Table:
    """Each resource and its state; only the busy or failed ones when there are many."""
    shown = list(rows)
    summary = ""
    if len(shown) > _LIVE_ROWS:
        busy = [r for r in shown if r.is_busy or r.status.endswith("FAILED")][:_LIVE_ROWS]
        waiting = sum(1 for r in shown if r.status == WAITING)
        done = sum(1 for r in shown if r.is_done and r not in busy)
        parts = [f"{waiting} waiting" if waiting else "", f"{done} done" if done else ""]
        if any(parts):
            summary = "… " + ", ".join(part for part in parts if part)
        shown = busy
    table = Table(box=None, show_header=True, header_style="dim")
    for column in ("resource", "type", "status", "reason"):
        table.add_column(column, overflow="ellipsis", no_wrap=True)
    for r in shown:
        table.add_row(r.name, r.type, _styled(r.status), r.reason[:80])
    if summary:
        table.add_row(summary, "", "", "")
    return table


def _styled(status: str) -> Text:
    if status == PAUSED:
        return Text(status, style="bold magenta")
    if status == WAITING:
        return Text(status, style="dim")
    return styled_status(status)


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
    progress: OperationProgress | None = None
    unreachable_since: float | None = None
    while True:
        try:
            # The stack first: its settling is written with its events, so reading the
            # events after it never misses the last ones.
            stack = await cv.get_stack(stack_id, include_deleted=True)
            events = await cv.list_events(stack_id, after_id=last_id)
            resources = await cv.list_resources(stack_id)
        except StoreError as exc:
            if isinstance(exc, StateError):
                raise  # the state itself is unusable: waiting does not help
            # The server is away (restarting, a network cut): wait for it, for a while.
            if unreachable_since is None:
                unreachable_since = loop.time()
                click.echo(f"warning: {exc}; waiting for the state database", err=True)
            elif loop.time() - unreachable_since > DATABASE_PATIENCE_SECONDS:
                raise
            await asyncio.sleep(poll)
            continue
        if unreachable_since is not None:
            unreachable_since = None
            click.echo("note: the state database is back", err=True)
        progress = progress or OperationProgress(stack.stack_name)
        for event in events:
            seen.append(event)
            last_id = event.id
            progress.add(event)
            display.event(event)
        display.resources(progress.rows(resources, settled=stack.status != "IN_PROGRESS"))
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
