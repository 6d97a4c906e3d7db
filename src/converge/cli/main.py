"""The ``converge`` command group; each command lives in its own module and is added here.

``validate`` is loaded alone: it is run once per template by CI jobs and editors, so its
start should not pay for the engine, the store and the terminal display that the other
commands import. Any other command, or the list of them (``--help``), loads them all.
"""

from __future__ import annotations

import click

from converge import __version__


class _Commands(click.Group):
    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._loaded = False

    def _load_all(self) -> None:
        if self._loaded:
            return
        self._loaded = True
        from converge.cli.api_server import api_command, copy_serve_options
        from converge.cli.drift_commands import register as register_drift_commands
        from converge.cli.serve import serve
        from converge.cli.stack_commands import register as register_stack_commands
        from converge.cli.state_commands import register as register_state_commands
        from converge.cli.token_commands import token
        from converge.cli.validate import validate

        self.add_command(validate)
        register_stack_commands(self)
        register_drift_commands(self)
        register_state_commands(self)
        self.add_command(serve)
        copy_serve_options()
        self.add_command(api_command)
        self.add_command(token)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name == "validate" and not self._loaded:
            from converge.cli.validate import validate

            return validate
        self._load_all()
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._load_all()
        return super().list_commands(ctx)


@click.group(cls=_Commands)
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
        from converge.cli.remote import Remote

        ctx.obj = Remote(url, token, project)
