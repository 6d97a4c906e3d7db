"""Running a stack command: opening the state file (or, with ``converge --url``, the
server's API), following an operation's events on a display, and its outcome as the final
document or summary and the exit code."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import click

from converge.cli import output
from converge.cli.boundary import EXIT_FAILED, EXIT_OK, Session, run_command
from converge.cli.inputs import embedded_settings
from converge.cli.progress import Display, LineDisplay, LiveDisplay, Outcome, QuietDisplay, follow
from converge.cli.remote import RemoteConverge, follow_remote, remote_settings
from converge.cli.target import current_broker, is_database_url, open_state, watching_workers

if TYPE_CHECKING:
    from converge.api import Converge


@asynccontextmanager
async def _open(
    state: str, *, must_exist: bool, read_only: bool = False
) -> AsyncIterator[Converge]:
    """The embedded converge over ``state``; reading commands do not create a missing file.
    With ``converge --url`` the commands go to that server's API instead.

    ``read_only``: the file is opened for reading alone and no engine runs (no service
    row, heartbeat or migration), so reading is cheap and works on a read-only file.
    """
    remote = remote_settings()
    if remote is not None:
        async with RemoteConverge.connect(remote) as client:
            yield client  # type: ignore[misc]  # the same calls, over HTTP
        return
    from converge.adapters.sql import state_file

    if must_exist and not is_database_url(state):
        state_file.prepare(state, create=False)  # NotFound naming the file (and directory)

    async with open_state(state, embedded_settings(state), read_only=read_only) as cv:
        yield cv


def _run(body: Callable[[Session], Coroutine[Any, Any, int]], debug: bool, log_json: bool) -> None:
    run_command(body, debug=debug, log_json=log_json)


def _display(fmt: str, title: str, stack_name: str) -> Display:
    if output.is_document(fmt):
        return QuietDisplay()
    if output.stdout_is_terminal():
        return LiveDisplay(output.make_console(), title, stack_name)
    return LineDisplay(output.make_console(), stack_name)


async def _follow(
    cv: Converge, stack_id: str, fmt: str, title: str, after: int | None, stack_name: str
) -> Outcome:
    display = _display(fmt, title, stack_name)
    try:
        if isinstance(cv, RemoteConverge):
            return await follow_remote(cv, stack_id, display, after_id=after)
        async with watching_workers(cv, title, stack_id):
            return await follow(cv, stack_id, display, after_id=after)
    finally:
        display.close()


async def _last_event_id(cv: Converge, stack_id: str) -> int | None:
    events = await cv.list_events(stack_id)
    return events[-1].id if events else None


def _report(outcome: Outcome, expected: str, fmt: str) -> int:
    """The final document or summary; exit 0 only when the expected action completed."""
    stack = outcome.stack
    succeeded = stack.stack_status == f"{expected}_COMPLETE"
    if output.is_document(fmt):
        document = {**stack.as_dict(), "resources": output.dicts(outcome.resources)}
        output.print_document(document, fmt)
    else:
        if succeeded and stack.outputs and expected != "DELETE":
            output.print_table(output.outputs_table(stack.outputs))
        console = output.make_console()
        console.print(f"Stack {stack.stack_name}", output.styled_status(stack.stack_status))
    if succeeded:
        return EXIT_OK
    reason = outcome.failure_reason
    if stack.stack_status == "ROLLBACK_COMPLETE":
        message = (
            f"error: the {expected.lower()} of stack {stack.stack_name} failed and was rolled "
            f"back: {reason}"
        )
    else:
        message = f"error: stack {stack.stack_name} is {stack.stack_status}: {reason}"
    click.echo(message, err=True)
    return EXIT_FAILED


def _interrupted(name: str, what: str) -> str:
    if current_broker() is not None:  # the serving processes do the work, not this one
        return (
            f"interrupted: stopped following the {what} of stack {name}; the workers carry "
            f"it on (`converge show {name}` tells how it ends)"
        )
    return (
        f"interrupted: the engine stopped cleanly with the {what} of stack {name} unfinished; "
        f"the next `converge apply` or `converge destroy` resumes or supersedes it"
    )
