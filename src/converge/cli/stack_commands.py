"""The embedded-mode commands: apply, plan, destroy, and reading stacks from a local SQLite file.

``register(group)`` adds them to the ``converge`` group. Each opens the state file (``--state``,
``CONVERGE_STATE``, default ``./converge.db``), runs an engine in this process for as long as
the command runs, and goes through the one error boundary in ``converge.cli.boundary``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml

from converge.cli import output, planfile
from converge.cli.boundary import EXIT_OK, Session
from converge.cli.inputs import Inputs, embedded_settings, read_inputs
from converge.cli.remote import RemoteConverge, remote_settings
from converge.cli.stack_options import _stack_name, common_options, template_options
from converge.cli.stack_session import _follow, _interrupted, _last_event_id, _open, _report, _run
from converge.cli.target import is_database_url, require_broker, require_worker
from converge.errors import ConvergeError, NotFound

if TYPE_CHECKING:
    from converge.api import Converge

# plan --detailed-exitcode: something would change (as terraform's)
EXIT_CHANGES = 2


# --- apply, plan, destroy ---------------------------------------------------------------------


@click.command()
@click.argument("template", type=click.Path(dir_okay=False))
@template_options
@click.option(
    "--rollback/--no-rollback",
    default=None,
    help="Roll back when the create/update fails (default on create; kept on update).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="MIN",
    help="Fail the operation after this many minutes.",
)
@click.option(
    "--drift-policy",
    type=click.Choice(["notify", "heal", "ignore"]),
    help="What to do when reality drifts (default notify on create; kept on update).",
)
@click.option(
    "--converge",
    "converge_reality",
    is_flag=True,
    help="Compare with observed reality, not only the last template: correct drift, "
    "re-create what was deleted (Heat's converge: true; update only).",
)
@click.option(
    "--existing",
    is_flag=True,
    help="Keep the stored parameters (and environment, when no -e is given), changing only "
    "what is given (Heat's --existing, a PATCH update).",
)
@common_options
def apply(
    template: str,
    environments: tuple[str, ...],
    parameters: tuple[str, ...],
    name: str | None,
    rollback: bool | None,
    timeout: float | None,
    drift_policy: str | None,
    converge_reality: bool,
    existing: bool,
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Create the stack from TEMPLATE, or update it if it exists, and show progress.

    TEMPLATE may be a plan saved by `converge plan -o FILE`: it is applied only if
    planning again now shows the same changes against the same stack.
    """
    is_plan = planfile.is_plan_file(template)
    if is_plan and (environments or parameters or name or existing):
        raise click.UsageError("a saved plan carries its inputs: no -e, -P, --name or --existing")

    async def body(session: Session) -> int:
        saved = planfile.read(template) if is_plan else None
        if saved is not None:
            stack_name, sources = saved.stack_name, _saved_sources(saved)
            files, given, converge = saved.files, saved.parameters, saved.converge
        else:
            inputs = read_inputs(template, environments, parameters)
            stack_name, sources = _stack_name(name, template), _sources(inputs)
            files, given, converge = dict(inputs.files), dict(inputs.parameters), converge_reality
        async with _open(state, must_exist=False) as cv:
            if saved is not None:
                await _check_plan(cv, template, saved, sources)
            try:
                current = await cv.get_stack(stack_name)
            except NotFound:
                current = None
            await require_worker(cv, stack_name, sources[0], sources[1:])
            if current is None:
                view = await cv.create_stack(
                    stack_name,
                    sources[0],
                    environments=sources[1:],
                    files=files,
                    parameters=given,
                    disable_rollback=rollback is False,
                    timeout_mins=timeout,
                    drift_policy=drift_policy or "notify",
                    wait=False,
                )
                expected, after = "CREATE", None
            else:
                after = await _last_event_id(cv, current.id)
                view = await cv.update_stack(
                    current.id,
                    sources[0],
                    # --existing without -e keeps the stored environment
                    environments=None if existing and len(sources) == 1 else sources[1:],
                    files=files,
                    parameters=given,
                    existing=existing,
                    disable_rollback=None if rollback is None else not rollback,
                    timeout_mins=timeout,
                    drift_policy=drift_policy,
                    converge=converge,
                    wait=False,
                )
                expected = "UPDATE"
            session.interrupt_message = _interrupted(stack_name, expected.lower())
            title = f"{expected.lower()} {stack_name}"
            outcome = await _follow(cv, view.id, output_format, title, after, stack_name)
            operation = cv.operation(view.id)
            if operation is not None:
                # Our operation's own end (a newer one may have followed it), or Superseded.
                outcome = dataclasses.replace(outcome, stack=await cv.outcome(operation))
            if current is not None and not existing:
                _note_reset_parameters(current.parameters, outcome.stack.parameters, given, sources)
            return _report(outcome, expected, output_format)

    _run(body, debug, log_json)


def _note_reset_parameters(
    before: Mapping[str, Any],
    after: Mapping[str, Any],
    given: Mapping[str, Any],
    sources: Sequence[Any],
) -> None:
    """Say which parameters went back to their defaults: an update without --existing uses
    only what it is given, as Heat's does, and a value given last time is easily forgotten."""
    named = set(given)
    for source in sources[1:]:
        data = yaml.safe_load(source.text) or {}
        if isinstance(data, dict):
            named |= set(data.get("parameters") or {}) | set(data.get("parameter_defaults") or {})
    for key in sorted(before):
        if key in named or key not in after or before[key] == after[key]:
            continue
        click.echo(
            f"note: parameter {key} is back to its default {output.value_text(after[key])!r} "
            f"(it was {output.value_text(before[key])!r}); `apply --existing` keeps stored "
            "values",
            err=True,
        )


def _saved_sources(saved: planfile.SavedPlan) -> list[Any]:
    from converge.api import Source

    return [Source(source["text"], source["filename"]) for source in saved.sources]


async def _check_plan(
    cv: Converge, path: str, saved: planfile.SavedPlan, sources: Sequence[Any]
) -> None:
    """Refuse a saved plan that planning again would not repeat."""
    stack_now = await planfile.fingerprint(cv, saved.stack_name)
    changes = await cv.plan(
        saved.stack_name,
        sources[0],
        environments=sources[1:],
        files=saved.files,
        parameters=saved.parameters,
        converge=saved.converge,
    )
    planfile.check_still_valid(path, saved, stack_now, output.dicts(changes))


def _sources(inputs: Inputs) -> list[Any]:
    """The template then the environments, as ``api.Source`` so errors name their files."""
    from converge.api import Source

    return [
        Source(source.text, source.filename) for source in (inputs.template, *inputs.environments)
    ]


@click.command()
@click.argument("template", type=click.Path(dir_okay=False))
@template_options
@click.option(
    "--converge",
    "converge_reality",
    is_flag=True,
    help="Observe reality first and plan as `apply --converge` would decide (drift shows).",
)
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 0 when nothing would change, 2 when something would (1 on errors).",
)
@click.option(
    "-o",
    "--out",
    "plan_out",
    type=click.Path(dir_okay=False),
    help="Save the plan to this file; `converge apply FILE` runs it if it still holds.",
)
@common_options
def plan(
    template: str,
    environments: tuple[str, ...],
    parameters: tuple[str, ...],
    name: str | None,
    converge_reality: bool,
    detailed_exitcode: bool,
    plan_out: str | None,
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Show what `converge apply` would create, update, replace and delete; change nothing."""

    async def body(session: Session) -> int:
        inputs = read_inputs(template, environments, parameters)
        stack_name = _stack_name(name, template)
        async with _open(state, must_exist=False) as cv:
            sources = _sources(inputs)
            stack_now = await planfile.fingerprint(cv, stack_name)
            changes = await cv.plan(
                stack_name,
                sources[0],
                environments=sources[1:],
                files=inputs.files,
                parameters=inputs.parameters,
                converge=converge_reality,
            )
        documents = output.dicts(changes)
        exists = stack_now is not None
        if plan_out is not None:
            saved = planfile.SavedPlan(
                stack_name=stack_name,
                converge=converge_reality,
                sources=[{"text": s.text, "filename": s.filename} for s in sources],
                files=dict(inputs.files),
                parameters=dict(inputs.parameters),
                stack=stack_now,
                changes=json.loads(output.to_json(documents)),
            )
            planfile.write(plan_out, saved)
        if output.is_document(output_format):
            document = {"stack_name": stack_name, "exists": exists, "changes": documents}
            output.print_document(document, output_format)
        else:
            console = output.make_console()
            if not exists:
                console.print(f"Stack {stack_name} does not exist yet: apply creates it.")
            output.print_table(output.plan_table(documents))
            console.print(output.plan_summary(documents))
            if plan_out is not None:
                console.print(f"Saved to {plan_out}: `converge apply {plan_out}` runs it.")
        changed = any(change["action"] != "NOTHING" for change in documents)
        return EXIT_CHANGES if detailed_exitcode and changed else EXIT_OK

    _run(body, debug, log_json)


@click.command()
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@common_options
def destroy(
    name: str, yes: bool, state: str, output_format: str, debug: bool, log_json: bool
) -> None:
    """Delete stack NAME and all its resources, showing progress."""
    if not yes:
        _confirm_destroy(name, state, debug, log_json)

    async def body(session: Session) -> int:
        async with _open(state, must_exist=True) as cv:
            stack = await cv.get_stack(name)
            await require_worker(cv, stack.id)
            after = await _last_event_id(cv, stack.id)
            await cv.delete_stack(stack.id, wait=False)
            session.interrupt_message = _interrupted(name, "delete")
            outcome = await _follow(cv, stack.id, output_format, f"delete {name}", after, name)
            return _report(outcome, "DELETE", output_format)

    _run(body, debug, log_json)


def _confirm_destroy(name: str, state: str, debug: bool, log_json: bool) -> None:
    """Ask before deleting, outside the event loop (a prompt must not block the engine)."""

    async def check(session: Session) -> int:
        async with _open(state, must_exist=True, read_only=True) as cv:
            stack = await cv.get_stack(name)
            rows = output.dicts(await cv.list_resources(stack.id))
        click.echo(f"Stack {name} ({stack.stack_status}) and its {len(rows)} resources:")
        for row in sorted(rows, key=lambda r: str(r["resource_name"])):
            physical = row.get("physical_resource_id") or "nothing real yet"
            click.echo(f"  {row['resource_name']}  {row['resource_type']}  {physical}")
        return EXIT_OK

    try:
        _run(check, debug, log_json)
    except click.exceptions.Exit as done:
        if done.exit_code != EXIT_OK:
            raise
    click.confirm(f"Delete stack {name} and all these resources?", abort=True)


# --- reading ------------------------------------------------------------------------------


def _reader(
    state: str,
    fmt: str,
    columns: Sequence[str],
    debug: bool,
    log_json: bool,
    read: Callable[[Converge], Coroutine[Any, Any, Any]],
    show: Callable[[Any], None],
) -> None:
    """Run ``read`` against the state file, then print its result as a document or with
    ``show`` (only the chosen ``columns`` when there are some)."""

    async def body(session: Session) -> int:
        async with _open(state, must_exist=True, read_only=True) as cv:
            result = await read(cv)
        output.emit(result, fmt, columns, show)
        return EXIT_OK

    _run(body, debug, log_json)


@click.command()
@click.argument("name")
@common_options
@output.column_option
def show(
    name: str,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """Show stack NAME: its status, parameters and outputs."""

    async def read(cv: Converge) -> dict[str, Any]:
        return (await cv.get_stack(name)).as_dict()

    def print_stack(stack: dict[str, Any]) -> None:
        output.print_table(output.stack_table(stack))
        if stack["outputs"]:
            output.print_table(output.outputs_table(stack["outputs"]))

    _reader(state, output_format, columns, debug, log_json, read, print_stack)


@click.command()
@click.argument("name")
@common_options
@output.column_option
def resources(
    name: str,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """List the resources of stack NAME."""

    async def read(cv: Converge) -> list[dict[str, Any]]:
        stack = await cv.get_stack(name)
        return output.dicts(await cv.list_resources(stack.id))

    _reader(
        state,
        output_format,
        columns,
        debug,
        log_json,
        read,
        lambda rows: output.print_table(output.resources_table(rows)),
    )


@click.command()
@click.argument("name")
@click.option("--resource", "-r", "resource_name", help="Only the events of this resource.")
@common_options
@output.column_option
def events(
    name: str,
    resource_name: str | None,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """List the events of stack NAME, oldest first (one line each when not on a terminal)."""

    async def read(cv: Converge) -> list[dict[str, Any]]:
        stack = await cv.get_stack(name)
        return output.dicts(await cv.list_events(stack.id, resource_name=resource_name))

    _reader(state, output_format, columns, debug, log_json, read, output.print_events)


@click.command()
@click.argument("name")
@click.argument("key", required=False)
@common_options
@output.column_option
def outputs(
    name: str,
    key: str | None,
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
) -> None:
    """Show the outputs of stack NAME, or the value of its output KEY alone."""

    async def read(cv: Converge) -> list[dict[str, Any]] | dict[str, Any]:
        found = await cv.outputs(name)
        if key is None:
            return found
        for item in found:
            if item.get("output_key") == key:
                return dict(item)
        known = ", ".join(sorted(str(item.get("output_key")) for item in found)) or "none"
        raise NotFound(f"stack {name} has no output {key!r} (its outputs: {known})")

    def print_outputs(result: list[dict[str, Any]] | dict[str, Any]) -> None:
        if isinstance(result, dict):  # one KEY: its value alone, ready for $(...)
            if result.get("output_error"):
                raise ConvergeError(f"output {key}: {result['output_error']}")
            click.echo(output.value_text(result.get("output_value")))
        else:
            output.print_table(output.outputs_table(result))

    if key is not None and output_format == output.Format.VALUE and not columns:
        columns = ("output_value",)
    _reader(state, output_format, columns, debug, log_json, read, print_outputs)


@click.command(name="list")
@common_options
@output.column_option
@click.option(
    "--nested", is_flag=True, help="Also list nested stacks (made by provider templates)."
)
def list_stacks(
    state: str,
    output_format: str,
    columns: tuple[str, ...],
    debug: bool,
    log_json: bool,
    nested: bool,
) -> None:
    """List the stacks in the state file."""
    if remote_settings() is None and not is_database_url(state) and not Path(state).exists():
        # No state file yet is no stacks yet; reading must not create the file.
        if output.is_document(output_format):
            output.print_document([], output_format)
        else:
            output.print_table(output.stacks_table([]))
        return

    async def read(cv: Converge) -> list[dict[str, Any]]:
        return output.dicts(await cv.list_stacks(show_nested=nested))

    _reader(
        state,
        output_format,
        columns,
        debug,
        log_json,
        read,
        lambda rows: output.print_table(output.stacks_table(rows)),
    )


# --- hooks --------------------------------------------------------------------------------


@click.group()
def hook() -> None:
    """Breakpoints: resources paused before or after an action."""


@hook.command(name="clear")
@click.argument("name")
@click.argument("resource")
@click.argument("hook_name", metavar="HOOK")
@common_options
def clear_hook(
    name: str,
    resource: str,
    hook_name: str,
    state: str,
    output_format: str,
    debug: bool,
    log_json: bool,
) -> None:
    """Let RESOURCE of stack NAME go on past HOOK (e.g. pre-create)."""

    async def body(session: Session) -> int:
        async with _open(state, must_exist=True) as cv:
            await require_broker(cv)  # the resumed work is sent through it
            await cv.clear_hook(name, resource, hook_name)
            session.interrupt_message = (
                f"interrupted: hook {hook_name} of {resource} is cleared; the stack's "
                "remaining work resumes with the next converge command that runs the engine"
            )
            # The resumed resource runs in this process's engine: let it finish its step
            # (against a server, the server's engine runs it).
            if not isinstance(cv, RemoteConverge):
                await cv.engine.idle()
        if output.is_document(output_format):
            document = {"stack": name, "resource": resource, "hook": hook_name}
            output.print_document(document, output_format)
        else:
            click.echo(f"Cleared hook {hook_name} on resource {resource} of stack {name}.")
        return EXIT_OK

    _run(body, debug, log_json)


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
