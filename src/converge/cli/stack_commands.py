"""The embedded-mode commands: apply, plan, destroy, and reading stacks from a local SQLite file.

``register(group)`` adds them to the ``converge`` group. Each opens the state file (``--state``,
``CONVERGE_STATE``, default ``./converge.db``), runs an engine in this process for as long as
the command runs, and goes through the one error boundary in ``converge.cli.boundary``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from converge.cli import output
from converge.cli.boundary import EXIT_OK, Session
from converge.cli.inputs import embedded_settings
from converge.cli.remote import RemoteConverge
from converge.cli.stack_apply import apply, plan
from converge.cli.stack_destroy import destroy
from converge.cli.stack_options import common_options
from converge.cli.stack_reading import events, list_stacks, outputs, resources, show
from converge.cli.stack_session import _open, _run
from converge.cli.target import require_broker

if TYPE_CHECKING:
    pass

# --- hooks --------------------------------------------------------------------------------


@click.group()
def hook() -> None:
    """Breakpoints: resources paused before or after an action."""


@hook.command(name="clear")
@click.argument("name")
@click.argument("resource")
@click.argument("hook_name", metavar="HOOK")
@common_options
def clear_hook(
    name: str,
    resource: str,
    hook_name: str,
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Let RESOURCE of stack NAME go on past HOOK (e.g. pre-create)."""

    async def body(session: Session) -> int:
        async with _open(state, must_exist=True) as cv:
            await require_broker(cv)  # the resumed work is sent through it
            await cv.clear_hook(name, resource, hook_name)
            session.interrupt_message = (
                f"interrupted: hook {hook_name} of {resource} is cleared; the stack's "
                "remaining work resumes with the next converge command that runs the engine"
            )
            # The resumed resource runs in this process's engine: let it finish its step
            # (against a server, the server's engine runs it).
            if not isinstance(cv, RemoteConverge):
                await cv.engine.idle()
        if output.is_document(output_format):
            document = {"stack": name, "resource": resource, "hook": hook_name}
            output.print_document(document, output_format)
        else:
            click.echo(f"Cleared hook {hook_name} on resource {resource} of stack {name}.")
        return EXIT_OK

    _run(body, debug, log_json)


COMMANDS: tuple[click.Command, ...] = (
    apply,
    plan,
    destroy,
    show,
    resources,
    events,
    outputs,
    list_stacks,
    hook,
)


def register(group: click.Group) -> None:
    """Add the embedded-mode commands to the ``converge`` group."""
    for command in COMMANDS:
        group.add_command(command)


# common_options and embedded_settings: imported from here by the other command modules.
__all__ = ["COMMANDS", "common_options", "embedded_settings", "register"]
