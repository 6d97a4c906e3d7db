"""``converge hook clear``: let a resource paused on a hook (a breakpoint before or after
an action) go on."""

from __future__ import annotations

import click

from converge.cli import output
from converge.cli.boundary import EXIT_OK, Session
from converge.cli.remote import RemoteConverge
from converge.cli.stack_options import common_options
from converge.cli.stack_session import _open, _run
from converge.cli.target import require_broker


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
