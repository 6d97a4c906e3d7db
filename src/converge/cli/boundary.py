"""The CLI's one error boundary: converge errors to one actionable line on stderr and an exit code.

Exit codes: 0 done; 1 the operation or the template failed; 2 a bad request or usage;
3 not found; 4 conflict with the current state; 5 the state database failed; 6 superseded:
a newer operation on the stack replaced this one before it finished; 7 unavailable: the
broker cannot be reached, or no worker process is alive to do the work (nothing was
started); 70 a bug in
converge; 130 interrupted (Ctrl-C). Tracebacks go to the log only (``--debug`` shows them).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

import click

from converge.cli.logging_setup import logging_to_stderr
from converge.errors import (
    Conflict,
    ConvergeError,
    InvalidRequest,
    NotFound,
    StateError,
    StoreError,
    Superseded,
    TemplateError,
    TemplateErrors,
    Unavailable,
)

log = logging.getLogger("converge.cli")

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_CONFLICT = 4
EXIT_STORE = 5
EXIT_SUPERSEDED = 6
EXIT_UNAVAILABLE = 7
EXIT_BUG = 70
EXIT_INTERRUPTED = 130

# Most specific first: the first matching class gives the exit code.
_EXIT_CODES: tuple[tuple[type[ConvergeError], int], ...] = (
    (TemplateError, EXIT_FAILED),
    (InvalidRequest, EXIT_USAGE),
    (NotFound, EXIT_NOT_FOUND),
    (Superseded, EXIT_SUPERSEDED),
    (Conflict, EXIT_CONFLICT),
    (StoreError, EXIT_STORE),
    (Unavailable, EXIT_UNAVAILABLE),
)


@dataclass
class Session:
    """What a running command tells the boundary: what to say if it is interrupted."""

    interrupt_message: str = "interrupted"


def exit_code(error: ConvergeError) -> int:
    for kind, code in _EXIT_CODES:
        if isinstance(error, kind):
            return code
    return EXIT_FAILED


def error_lines(error: ConvergeError) -> list[str]:
    """What stderr shows: every template problem as ``file:line: path: message``, else one line."""
    if isinstance(error, TemplateErrors):
        count = len(error.errors)
        return [*error.format().splitlines(), f"{count} problems found; nothing was changed"]
    if isinstance(error, TemplateError):
        return [error.format(), "nothing was changed"]
    if isinstance(error, StateError):
        return [f"error: state {error.location}: {error.reason}"]
    if isinstance(error, StoreError):
        return [f"error: the state database failed: {error}"]
    return [f"error: {error}"]


def run_command(
    main: Callable[[Session], Coroutine[Any, Any, int]], *, debug: bool, log_json: bool
) -> None:
    """Run an async command body and leave with its exit code, errors shown the one way."""
    session = Session()
    with logging_to_stderr(debug=debug, log_json=log_json):
        try:
            code = asyncio.run(main(session))
        except KeyboardInterrupt:
            click.echo(session.interrupt_message, err=True)
            code = EXIT_INTERRUPTED
        except ConvergeError as error:
            log.debug("command failed", exc_info=True)
            for line in error_lines(error):
                click.echo(line, err=True)
            code = exit_code(error)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as error:
            log.debug("internal error", exc_info=True)
            click.echo(
                f"error: internal error ({type(error).__name__}: {error}); this is a bug in "
                "converge: please report it with the output of --debug",
                err=True,
            )
            code = EXIT_BUG
    raise click.exceptions.Exit(code)
