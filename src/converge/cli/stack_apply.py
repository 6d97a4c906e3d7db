"""``converge apply`` and ``converge plan``: a template (or a saved plan) against a stack,
applied with its progress followed, or shown as what would change."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import click
import yaml

from converge.cli import output, planfile
from converge.cli.boundary import EXIT_OK, Session
from converge.cli.inputs import Inputs, read_inputs
from converge.cli.stack_options import _stack_name, common_options, template_options
from converge.cli.stack_session import _follow, _interrupted, _last_event_id, _open, _report, _run
from converge.cli.target import require_worker
from converge.errors import NotFound

if TYPE_CHECKING:
    from converge.api import Converge


# plan --detailed-exitcode: something would change (as terraform's)
EXIT_CHANGES = 2


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
