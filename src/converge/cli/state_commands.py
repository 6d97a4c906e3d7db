"""``converge state check|backup|upgrade``: looking after the state file.

Neither starts an engine: both read the file through SQLite alone, so they work while
``converge serve`` runs and on a read-only copy.
"""

from __future__ import annotations

import click

from converge.cli import output
from converge.cli.boundary import EXIT_OK, EXIT_STORE, Session, run_command
from converge.cli.stack_commands import common_options
from converge.cli.target import is_database_url
from converge.errors import InvalidRequest


def _file_only(state: str, what: str) -> None:
    """These commands look after a SQLite file; a database server has its own tools."""
    if is_database_url(state):
        raise InvalidRequest(
            f"`converge state {what}` works on a SQLite state file; for a database URL use "
            "the database's own tools (pg_dump, pg_amcheck); commands that write bring its "
            "schema up to date by themselves"
        )


@click.group()
def state() -> None:
    """The state file: check its integrity, back it up, upgrade its schema."""


@state.command(name="check")
@common_options
def check_state(state: str, output_format: str, debug: bool, log_json: bool) -> None:
    """Check the state file: SQLite's integrity check, foreign keys, schema version.

    Exits 0 when it is sound and 5 when it is not; nothing is written.
    """

    async def body(session: Session) -> int:
        _file_only(state, "check")
        from converge.adapters.sql import maintenance

        report = maintenance.check(state)
        if output_format == output.Format.JSON:
            output.print_json(report.as_dict())
        elif report.ok:
            click.echo(f"{report.path}: ok (schema {report.schema})")
        else:
            for problem in report.problems:
                click.echo(f"{report.path}: {problem}", err=True)
        return EXIT_OK if report.ok else EXIT_STORE

    run_command(body, debug=debug, log_json=log_json)


@state.command(name="backup")
@click.argument("target", type=click.Path(dir_okay=False))
@click.option("--force", is_flag=True, help="Overwrite TARGET if it exists.")
@common_options
def backup_state(
    target: str, force: bool, state: str, output_format: str, debug: bool, log_json: bool
) -> None:
    """Copy the state file to TARGET (SQLite's online backup; safe while converge runs).

    The copy is readable by its owner only (0600). TARGET is not overwritten unless
    --force is given. Restore by putting the copy in place of the state file while no
    converge runs.
    """

    async def body(session: Session) -> int:
        _file_only(state, "backup")
        from converge.adapters.sql import maintenance

        written = maintenance.backup(state, target, force=force)
        if output_format == output.Format.JSON:
            output.print_json({"state": state, "backup": str(written)})
        else:
            click.echo(f"backed up {state} to {written}")
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


@state.command(name="upgrade")
@common_options
def upgrade_state(state: str, output_format: str, debug: bool, log_json: bool) -> None:
    """Bring the state file's schema up to date for this converge.

    Commands that write (apply, destroy, ...) do this on their own; reading commands
    never write, so they ask for it when the file was written by an older converge.
    """

    async def body(session: Session) -> int:
        _file_only(state, "upgrade")
        from converge.adapters.sql import maintenance

        before, after = await maintenance.upgrade(state)
        if output_format == output.Format.JSON:
            output.print_json({"state": state, "schema_before": before, "schema": after})
        elif before == after:
            click.echo(f"{state}: schema {after}, already up to date")
        else:
            click.echo(f"{state}: schema {before} upgraded to {after}")
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


COMMANDS: tuple[click.Command, ...] = (state,)


def register(group: click.Group) -> None:
    """Add the ``state`` commands to the ``converge`` group."""
    for command in COMMANDS:
        group.add_command(command)


__all__ = ["COMMANDS", "register"]
