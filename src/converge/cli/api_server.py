"""The REST API inside ``converge serve`` (``--api HOST:PORT``, ``--noauth``) and ``converge
api``, the same server under a shorter name."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from converge.api import Converge

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_API_ADDRESS = "127.0.0.1:8004"


def api_options(function: F) -> F:
    """``--api HOST:PORT``, ``--noauth`` and ``--local-types``."""
    decorators = [
        click.option(
            "--api",
            metavar="HOST:PORT",
            envvar="CONVERGE_API",
            help="Also serve Heat's REST API on this address (e.g. 127.0.0.1:8004).",
        ),
        click.option(
            "--noauth",
            is_flag=True,
            help="Serve the API without tokens (every request is admin): loopback only.",
        ),
        click.option(
            "--local-types",
            is_flag=True,
            help="Let templates sent to the API use Local::* types (files, processes).",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


@contextlib.asynccontextmanager
async def api_server(cv: Converge, address: str | None, *, noauth: bool) -> AsyncIterator[None]:
    """Serve the API on ``address`` while the block runs (nothing when it is None)."""
    if address is None:
        if noauth:
            raise click.UsageError("--noauth needs --api HOST:PORT")
        yield
        return
    from converge.rest.server import parse_address, serving_api

    host, port = parse_address(address)
    async with serving_api(cv, host, port, noauth=noauth) as (bound_host, bound_port):
        auth = "WITHOUT authentication" if noauth else "tokens required"
        click.echo(
            f"converge serve: Heat API on http://{bound_host}:{bound_port}/v1/PROJECT ({auth})",
            err=True,
        )
        yield


@click.command(name="api", context_settings={"ignore_unknown_options": False})
@click.argument("address", default=DEFAULT_API_ADDRESS, metavar="[HOST:PORT]")
@click.pass_context
def api_command(ctx: click.Context, address: str, **_: Any) -> None:
    """Serve Heat's REST API on HOST:PORT (default 127.0.0.1:8004) with the engine, its
    workers and the synchronizer: `converge serve --api HOST:PORT`."""
    from converge.cli.serve import serve

    ctx.invoke(serve, api=address, **{k: v for k, v in ctx.params.items() if k != "address"})


def copy_serve_options() -> None:
    """``converge api`` takes every option of ``converge serve`` except ``--api``."""
    from converge.cli.serve import serve

    for param in serve.params:
        if param.name != "api":
            api_command.params.append(param)
