"""Reading stacks: ``converge show``, ``resources``, ``events``, ``outputs`` and ``list``, each
printed as a table or a document, from the state file opened for reading alone."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from converge.cli import output
from converge.cli.boundary import EXIT_OK, Session
from converge.cli.remote import remote_settings
from converge.cli.stack_options import common_options
from converge.cli.stack_session import _open, _run
from converge.cli.target import is_database_url
from converge.errors import ConvergeError, NotFound

if TYPE_CHECKING:
    from converge.api import Converge


def _reader(
    state: str,
    fmt: str,
    columns: Sequence[str],
    debug: bool,
    log_json: bool,
    read: Callable[[Converge], Coroutine[Any, Any, Any]],
    show: Callable[[Any], None],
) -> None:
    """Run ``read`` against the state file, then print its result as a document or with
    ``show`` (only the chosen ``columns`` when there are some)."""

    async def body(session: Session) -> int:
        async with _open(state, must_exist=True, read_only=True) as cv:
            result = await read(cv)
        output.emit(result, fmt, columns, show)
        return EXIT_OK

    _run(body, debug, log_json)


@click.command()
@click.argument("name")
@common_options
@output.column_option
def show(
    name: str,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """Show stack NAME: its status, parameters and outputs."""

    async def read(cv: Converge) -> dict[str, Any]:
        return (await cv.get_stack(name)).as_dict()

    def print_stack(stack: dict[str, Any]) -> None:
        output.print_table(output.stack_table(stack))
        if stack["outputs"]:
            output.print_table(output.outputs_table(stack["outputs"]))

    _reader(state, output_format, columns, debug, log_json, read, print_stack)


@click.command()
@click.argument("name")
@common_options
@output.column_option
def resources(
    name: str,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """List the resources of stack NAME."""

    async def read(cv: Converge) -> list[dict[str, Any]]:
        stack = await cv.get_stack(name)
        return output.dicts(await cv.list_resources(stack.id))

    _reader(
        state,
        output_format,
        columns,
        debug,
        log_json,
        read,
        lambda rows: output.print_table(output.resources_table(rows)),
    )


@click.command()
@click.argument("name")
@click.option("--resource", "-r", "resource_name", help="Only the events of this resource.")
@common_options
@output.column_option
def events(
    name: str,
    resource_name: str | None,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """List the events of stack NAME, oldest first (one line each when not on a terminal)."""

    async def read(cv: Converge) -> list[dict[str, Any]]:
        stack = await cv.get_stack(name)
        return output.dicts(await cv.list_events(stack.id, resource_name=resource_name))

    _reader(state, output_format, columns, debug, log_json, read, output.print_events)


@click.command()
@click.argument("name")
@click.argument("key", required=False)
@common_options
@output.column_option
def outputs(
    name: str,
    key: str | None,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """Show the outputs of stack NAME, or the value of its output KEY alone."""

    async def read(cv: Converge) -> list[dict[str, Any]] | dict[str, Any]:
        found = await cv.outputs(name)
        if key is None:
            return found
        for item in found:
            if item.get("output_key") == key:
                return dict(item)
        known = ", ".join(sorted(str(item.get("output_key")) for item in found)) or "none"
        raise NotFound(f"stack {name} has no output {key!r} (its outputs: {known})")

    def print_outputs(result: list[dict[str, Any]] | dict[str, Any]) -> None:
        if isinstance(result, dict):  # one KEY: its value alone, ready for $(...)
            if result.get("output_error"):
                raise ConvergeError(f"output {key}: {result['output_error']}")
            click.echo(output.value_text(result.get("output_value")))
        else:
            output.print_table(output.outputs_table(result))

    if key is not None and output_format == output.Format.VALUE and not columns:
        columns = ("output_value",)
    _reader(state, output_format, columns, debug, log_json, read, print_outputs)


@click.command(name="list")
@common_options
@output.column_option
@click.option(
    "--nested", is_flag=True, help="Also list nested stacks (made by provider templates)."
)
def list_stacks(
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
    nested: bool,
) -> None:
    """List the stacks in the state file."""
    if remote_settings() is None and not is_database_url(state) and not Path(state).exists():
        # No state file yet is no stacks yet; reading must not create the file.
        if output.is_document(output_format):
            output.print_document([], output_format)
        else:
            output.print_table(output.stacks_table([]))
        return

    async def read(cv: Converge) -> list[dict[str, Any]]:
        return output.dicts(await cv.list_stacks(show_nested=nested))

    _reader(
        state,
        output_format,
        columns,
        debug,
        log_json,
        read,
        lambda rows: output.print_table(output.stacks_table(rows)),
    )
