"""Reality commands: check, drift and the test world.

``check NAME`` observes every resource and records its drift; ``drift NAME`` shows the last
result; ``world`` shows and changes the simulated reality of the built-in test types (a
test world for demos and tests: nothing real). ``converge serve``, which keeps every stack
healed or reported by its drift policy, is in ``converge.cli.serve``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from rich.table import Table

from converge.cli import output
from converge.cli.boundary import EXIT_FAILED, EXIT_OK, Session, run_command
from converge.cli.remote import RemoteConverge, remote_settings
from converge.cli.stack_commands import common_options, embedded_settings
from converge.cli.target import is_database_url, open_state, require_worker
from converge.core.drift import short_digest
from converge.errors import InvalidRequest, NotFound
from converge.resources.builtin.world import SETTING, TestWorld, world_path_for

if TYPE_CHECKING:
    from converge.api import Converge


def _drift_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(box=None, pad_edge=False)
    for column in ("resource_name", "resource_type", "drift_status", "wanted / found"):
        table.add_column(column, overflow="fold")
    for row in rows:
        detail = row.get("drift_detail") or {}
        diffs = row.get("drift_diff") or {}
        changes = "; ".join(
            f"{name}: differs, see the diff below"
            if name in diffs
            else f"{name}: {output.short_value(short_digest(change.get('wanted')))} / "
            f"{output.short_value(short_digest(change.get('found')))}"
            for name, change in detail.items()
        )
        table.add_row(
            row["resource_name"],
            row["resource_type"],
            output.styled_status(row["drift_status"]),
            changes,
        )
    return table


def _show_drift(rows: Sequence[Mapping[str, Any]]) -> None:
    """The drift table, then each content diff whole (a table cell would fold it)."""
    output.print_table(_drift_table(rows))
    for row in rows:
        for name, text in (row.get("drift_diff") or {}).items():
            click.echo(f"\n{row['resource_name']} {name}, as observed now (- wanted, + found):")
            click.echo(text)


async def _open(state: str) -> contextlib.AbstractAsyncContextManager[Converge]:
    remote = remote_settings()
    if remote is not None:  # converge --url: through the server's API
        return RemoteConverge.connect(remote)  # type: ignore[return-value]
    if not is_database_url(state) and not Path(state).exists():
        raise NotFound(
            f"no state file at {state}: no stacks yet (--state or CONVERGE_STATE chooses the file)"
        )
    return open_state(state, embedded_settings(state))


# --- check and drift ------------------------------------------------------------------------


@click.command()
@click.argument("name")
@output.column_option
@common_options
def check(
    name: str,
    columns: tuple[str, ...],
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Observe every resource of stack NAME and record its drift (-c: fields of each
    resource's drift)."""

    async def body(session: Session) -> int:
        async with await _open(state) as cv:
            await require_worker(cv, name)  # a CHECK is a traversal: the workers observe
            stack = await cv.check_stack(name)
            drift = output.dicts(await cv.drift(stack.id, diffs=True))
        if output.is_document(output_format) and not columns:
            output.print_document({**stack.as_dict(), "resources": drift}, output_format)
        else:
            output.emit(drift, output_format, columns, _show_drift)
            console = output.make_console(stderr=output.is_document(output_format))
            console.print(f"Stack {stack.stack_name}", output.styled_status(stack.stack_status))
        if stack.stack_status != "CHECK_COMPLETE":
            click.echo(f"error: {stack.stack_status_reason}", err=True)
            return EXIT_FAILED
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


@click.command()
@click.argument("name")
@output.column_option
@common_options
def drift(
    name: str,
    columns: tuple[str, ...],
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Show the drift of each resource of stack NAME as last recorded; a modified file is
    observed again to show how its content differs."""

    async def body(session: Session) -> int:
        async with await _open(state) as cv:
            rows = output.dicts(await cv.drift(name, diffs=True))
        output.emit(rows, output_format, columns, _show_drift)
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


# --- the test world -------------------------------------------------------------------------


@click.group()
def world() -> None:
    """The test world: simulated reality of the built-in test types (OS::Heat::None,
    TestResource, Value, RandomString, Dummy). Nothing here is real; change it to make
    drift on purpose."""


def _world(state: str) -> TestWorld:
    if not is_database_url(state):
        return TestWorld(world_path_for(state))
    path = embedded_settings(state).plugin_settings.get(SETTING)
    if not path:
        raise InvalidRequest(
            "with a database URL as the state, the test world is the file that "
            "CONVERGE_TEST_WORLD names (the same for every converge process): set it"
        )
    return TestWorld(path)


@world.command(name="show")
@click.argument("type_name", required=False, metavar="[TYPE]")
@common_options
def world_show(
    type_name: str | None, state: str, output_format: str, debug: bool, log_json: bool
) -> None:
    """Show every entity of the test world (or of one TYPE)."""
    entities = _world(state).snapshot()
    if type_name is not None:
        entities = {type_name: entities.get(type_name, {})}
    if output.is_document(output_format):
        output.print_document(entities, output_format)
        return
    table = Table(box=None, pad_edge=False)
    for column in ("type", "physical_resource_id", "properties"):
        table.add_column(column, overflow="fold")
    for kind, things in sorted(entities.items()):
        for pid, entity in sorted(things.items()):
            table.add_row(kind, pid, output.to_json(entity.get("properties") or {}))
    output.make_console().print(table)


def _assignments(values: Sequence[str]) -> dict[str, Any]:
    parsed: dict[str, Any] = {}
    for item in values:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise InvalidRequest(f"expected KEY=VALUE, got {item!r}")
        parsed[key] = yaml.safe_load(text) if text else ""
    return parsed


@world.command(name="set")
@click.argument("type_name", metavar="TYPE")
@click.argument("physical_id")
@click.argument("assignments", nargs=-1, required=True, metavar="KEY=VALUE...")
@common_options
def world_set(
    type_name: str,
    physical_id: str,
    assignments: tuple[str, ...],
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Change properties of an entity out of band (values are YAML: 5 is a number)."""

    async def body(session: Session) -> int:
        target = _world(state)
        for key, value in _assignments(assignments).items():
            try:
                target.set_property(type_name, physical_id, key, value)
            except KeyError as exc:
                raise NotFound(f"{exc.args[0]} (see `converge world show`)") from None
        click.echo(f"Changed {type_name} {physical_id} in the test world.")
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


@world.command(name="delete")
@click.argument("type_name", metavar="TYPE")
@click.argument("physical_id")
@common_options
def world_delete(
    type_name: str, physical_id: str, state: str, output_format: str, debug: bool, log_json: bool
) -> None:
    """Delete an entity out of band, as if someone removed the real thing."""

    async def body(session: Session) -> int:
        if not _world(state).remove(type_name, physical_id):
            raise NotFound(
                f"the test world has no {type_name} {physical_id!r} (see `converge world show`)"
            )
        click.echo(f"Deleted {type_name} {physical_id} from the test world.")
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


COMMANDS: tuple[click.Command, ...] = (check, drift, world)


def register(group: click.Group) -> None:
    """Add the reality commands to the ``converge`` group."""
    for command in COMMANDS:
        group.add_command(command)


__all__ = ["COMMANDS", "register"]
