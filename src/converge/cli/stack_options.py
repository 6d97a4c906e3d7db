"""The options the stack commands share: ``common_options`` (state, broker, format, logging)
on every command, ``template_options`` (environments, parameters, stack name) on apply and
plan."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from converge.cli import output
from converge.cli.inputs import parse_parameters
from converge.cli.target import broker_options

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_STATE = "converge.db"


def common_options(function: F) -> F:
    """``--state``, ``--broker``, ``-f/--format``, ``--debug`` and ``--log-json``."""
    decorators = [
        click.option(
            "--state",
            envvar="CONVERGE_STATE",
            default=DEFAULT_STATE,
            show_default=True,
            metavar="PATH|URL",
            help="The SQLite file holding the stacks, or a database URL "
            "(postgresql://USER@HOST/DB) shared by several processes (env CONVERGE_STATE).",
        ),
        broker_options,
        output.format_option,
        click.option(
            "--debug",
            envvar="CONVERGE_DEBUG",
            is_flag=True,
            help="Log everything, with tracebacks, to stderr (env CONVERGE_DEBUG=1).",
        ),
        click.option(
            "--log-json",
            envvar="CONVERGE_LOG_JSON",
            is_flag=True,
            help="Write logs as JSON lines to stderr (env CONVERGE_LOG_JSON=1).",
        ),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def template_options(function: F) -> F:
    """``-e ENV``, ``-P key=value`` and ``--name`` (apply and plan)."""
    decorators = [
        click.option(
            "-e",
            "--environment",
            "environments",
            multiple=True,
            type=click.Path(dir_okay=False),
            help="An environment file; repeat to merge several (later ones win).",
        ),
        click.option(
            "-P",
            "--parameter",
            "parameters",
            multiple=True,
            callback=_check_parameters,
            metavar="KEY=VALUE",
            help="A template parameter; repeat for more (the last value of a key wins).",
        ),
        click.option("--name", help="The stack name (default: the template file's stem)."),
    ]
    for decorator in reversed(decorators):
        function = decorator(function)
    return function


def _check_parameters(
    ctx: click.Context, param: click.Parameter, value: Sequence[str]
) -> tuple[str, ...]:
    try:
        parse_parameters(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return tuple(value)


def _stack_name(name: str | None, template: str) -> str:
    return name if name is not None else Path(template).stem
