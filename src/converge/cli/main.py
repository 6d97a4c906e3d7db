"""The ``converge`` command group; each command lives in its own module and is added here."""

from __future__ import annotations

import click

from converge import __version__
from converge.cli.api_server import api_command, copy_serve_options
from converge.cli.drift_commands import register as register_drift_commands
from converge.cli.remote import Remote
from converge.cli.stack_commands import register as register_stack_commands
from converge.cli.token_commands import token
from converge.cli.validate import validate


@click.group()
@click.version_option(__version__, "--version", prog_name="converge")
@click.option(
    "--url",
    envvar="CONVERGE_URL",
    metavar="URL",
    help="Run the commands through a converge server's API (http://HOST:8004) instead of "
    "a local state file (env CONVERGE_URL).",
)
@click.option("--token", envvar="CONVERGE_TOKEN", help="The API token (env CONVERGE_TOKEN).")
@click.option(
    "--project",
    envvar="CONVERGE_PROJECT",
    help="The project to act in (default: the token's; env CONVERGE_PROJECT).",
)
@click.pass_context
def main(ctx: click.Context, url: str | None, token: str | None, project: str | None) -> None:
    """converge: Heat (HOT) templates converged by stateless workers, with drift detection."""
    if url is not None:
        ctx.obj = Remote(url, token, project)


main.add_command(validate)
register_stack_commands(main)
register_drift_commands(main)
copy_serve_options()
main.add_command(api_command)
main.add_command(token)
