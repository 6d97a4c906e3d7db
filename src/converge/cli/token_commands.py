"""``converge token create/list/revoke``: the API tokens a REST request presents.

A token stands for one project and a role (``admin``, ``member``, ``reader``); only a hash
of it is stored, so ``create`` shows the secret once.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import click
from rich.table import Table

from converge.cli import output
from converge.cli.boundary import EXIT_OK, Session, run_command
from converge.cli.stack_commands import common_options, embedded_settings
from converge.cli.target import open_state


def _when(timestamp: float | None) -> str:
    if timestamp is None:
        return ""
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _document(record: Any) -> dict[str, Any]:
    return {
        "id": record.id,
        "project_id": record.project_id,
        "role": record.role,
        "description": record.description,
        "created_at": _when(record.created_at),
        "revoked_at": _when(record.revoked_at) or None,
    }


@click.group()
def token() -> None:
    """API tokens: each stands for a project and a role (X-Auth-Token)."""


@token.command(name="create")
@click.option("--project", required=True, help="The project (Heat's tenant) the token acts in.")
@click.option(
    "--role",
    type=click.Choice(["admin", "member", "reader"]),
    default="member",
    show_default=True,
    help="reader: read only; member: change the project's stacks; admin: any project.",
)
@click.option("--description", default="", help="What the token is for.")
@common_options
def create_token(
    project: str,
    role: str,
    description: str,
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Make a token; its secret is shown this once (only its hash is kept)."""

    async def body(session: Session) -> int:
        async with open_state(state, embedded_settings(state)) as cv:
            secret, record = await cv.create_token(project, role, description)
        if output_format == output.Format.JSON:
            output.print_json({**_document(record), "token": secret})
        else:
            click.echo(secret)
            click.echo(
                f"token {record.id}: project {record.project_id}, role {record.role} (the "
                "secret above is not shown again)",
                err=True,
            )
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


@token.command(name="list")
@click.option("--project", default=None, help="Only the tokens of this project.")
@common_options
def list_tokens(
    project: str | None, state: str, output_format: str, debug: bool, log_json: bool
) -> None:
    """List tokens (never their secrets)."""

    async def body(session: Session) -> int:
        async with open_state(state, embedded_settings(state)) as cv:
            records = [_document(r) for r in await cv.list_tokens(project)]
        if output_format == output.Format.JSON:
            output.print_json(records)
            return EXIT_OK
        table = Table(box=None, pad_edge=False)
        for column in ("id", "project_id", "role", "description", "created_at", "revoked_at"):
            table.add_column(column)
        for record in records:
            table.add_row(*(str(record[key] or "") for key in record))
        output.make_console().print(table)
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)


@token.command(name="revoke")
@click.argument("token_id")
@common_options
def revoke_token(
    token_id: str, state: str, output_format: str, debug: bool, log_json: bool
) -> None:
    """Revoke token TOKEN_ID: requests with it are refused from now on."""

    async def body(session: Session) -> int:
        async with open_state(state, embedded_settings(state)) as cv:
            await cv.revoke_token(token_id)
        if output_format == output.Format.JSON:
            output.print_json({"id": token_id, "revoked": True})
        else:
            click.echo(f"Revoked token {token_id}.")
        return EXIT_OK

    run_command(body, debug=debug, log_json=log_json)
