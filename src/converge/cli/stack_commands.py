"""The embedded-mode commands: apply, plan, destroy, and reading stacks from a local SQLite file.

``register(group)`` adds them to the ``converge`` group. Each opens the state file (``--state``,
``CONVERGE_STATE``, default ``./converge.db``), runs an engine in this process for as long as
the command runs, and goes through the one error boundary in ``converge.cli.boundary``.

The commands live by concept: ``stack_apply.py`` (apply, plan), ``stack_destroy.py``,
``stack_reading.py`` (show, resources, events, outputs, list), ``stack_hooks.py``; the options
they share are ``stack_options.py``, how a command opens the state, follows an operation and
ends ``stack_session.py``. This module lists them for the ``converge`` group.
"""

from __future__ import annotations

import click

from converge.cli.inputs import embedded_settings
from converge.cli.stack_apply import apply, plan
from converge.cli.stack_destroy import destroy
from converge.cli.stack_hooks import hook
from converge.cli.stack_options import common_options
from converge.cli.stack_reading import events, list_stacks, outputs, resources, show

COMMANDS: tuple[click.Command, ...] = (
    apply,
    plan,
    destroy,
    show,
    resources,
    events,
    outputs,
    list_stacks,
    hook,
)


def register(group: click.Group) -> None:
    """Add the embedded-mode commands to the ``converge`` group."""
    for command in COMMANDS:
        group.add_command(command)


# common_options and embedded_settings: imported from here by the other command modules.
__all__ = ["COMMANDS", "common_options", "embedded_settings", "register"]
