"""``converge destroy``: delete a stack and its resources, after asking (unless ``--yes``)
with what would go listed."""

from __future__ import annotations

import click

from converge.cli import output
from converge.cli.boundary import EXIT_OK, Session
from converge.cli.stack_options import common_options
from converge.cli.stack_session import _follow, _interrupted, _last_event_id, _open, _report, _run
from converge.cli.target import require_worker


@click.command()
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@common_options
def destroy(
    name: str, yes: bool, state: str, output_format: str, debug: bool, log_json: bool
) -> None:
    """Delete stack NAME and all its resources, showing progress."""
    if not yes:
        _confirm_destroy(name, state, debug, log_json)

    async def body(session: Session) -> int:
        async with _open(state, must_exist=True) as cv:
            stack = await cv.get_stack(name)
            await require_worker(cv, stack.id)
            after = await _last_event_id(cv, stack.id)
            await cv.delete_stack(stack.id, wait=False)
            session.interrupt_message = _interrupted(name, "delete")
            outcome = await _follow(cv, stack.id, output_format, f"delete {name}", after, name)
            return _report(outcome, "DELETE", output_format)

    _run(body, debug, log_json)


def _confirm_destroy(name: str, state: str, debug: bool, log_json: bool) -> None:
    """Ask before deleting, outside the event loop (a prompt must not block the engine)."""

    async def check(session: Session) -> int:
        async with _open(state, must_exist=True, read_only=True) as cv:
            stack = await cv.get_stack(name)
            rows = output.dicts(await cv.list_resources(stack.id))
        click.echo(f"Stack {name} ({stack.stack_status}) and its {len(rows)} resources:")
        for row in sorted(rows, key=lambda r: str(r["resource_name"])):
            physical = row.get("physical_resource_id") or "nothing real yet"
            click.echo(f"  {row['resource_name']}  {row['resource_type']}  {physical}")
        return EXIT_OK

    try:
        _run(check, debug, log_json)
    except click.exceptions.Exit as done:
        if done.exit_code != EXIT_OK:
            raise
    click.confirm(f"Delete stack {name} and all these resources?", abort=True)
