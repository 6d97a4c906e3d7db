"""The ``converge`` command group; each command lives in its own module and is added here."""

from __future__ import annotations

import click

from converge import __version__
from converge.cli.drift_commands import register as register_drift_commands
from converge.cli.stack_commands import register as register_stack_commands
from converge.cli.state_commands import register as register_state_commands
from converge.cli.validate import validate


@click.group()
@click.version_option(__version__, "--version", prog_name="converge")
def main() -> None:
    """converge: Heat (HOT) templates converged by stateless workers, with drift detection."""


main.add_command(validate)
register_stack_commands(main)
register_drift_commands(main)
register_state_commands(main)
