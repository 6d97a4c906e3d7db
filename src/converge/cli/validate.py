"""``converge validate``: check templates with their environments and parameters, offline.

As Heat's validate, it needs no parameter values: a parameter without one is noted, and
what depends on it is checked as far as it can be (``plan`` and ``apply`` demand them).
The files map is read as ``apply`` reads it (``inputs.py``: relative to the file that
names it, as python-heatclient does). Several templates are checked in one run, each with
the same environments and parameters, so a directory of templates costs one start.

Start time matters here (a CI job validates one template per call): the plugins, the
engine's checks and everything else heavy are imported only once a template is read.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from converge.core.template import StackDefinition
    from converge.engine.settings import EngineSettings
    from converge.errors import TemplateError

_HIDDEN = "******"


def _parameters(values: tuple[str, ...]) -> dict[str, str]:
    from converge.cli.inputs import parse_parameters

    try:
        return parse_parameters(values)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="-P") from None


def _summary(definition: StackDefinition) -> dict[str, Any]:
    types: dict[str, int] = {}
    for resource in definition.resources.values():
        types[resource.type] = types.get(resource.type, 0) + 1
    return {
        "version": definition.version.date,
        "version_key": definition.version.version_key,
        "description": definition.description,
        "resources": {name: r.type for name, r in definition.resources.items()},
        "resource_types": dict(sorted(types.items())),
        "parameters": {
            name: _HIDDEN if name in definition.hidden_parameters else value
            for name, value in definition.parameters.items()
        },
        "outputs": list(definition.outputs),
        "notes": list(definition.notes),
    }


def _sorted_errors(error: TemplateError) -> list[TemplateError]:
    from converge.errors import TemplateErrors

    errors = error.errors if isinstance(error, TemplateErrors) else [error]
    return sorted(errors, key=lambda e: (e.file or "", e.line or 0))


def run_validate(
    template_path: Path,
    environment_paths: list[Path],
    parameters: dict[str, str],
    settings: EngineSettings | None = None,
    *,
    strict: bool = False,
) -> tuple[StackDefinition | None, list[TemplateError]]:
    """Validate files on disk; the definition, or the problems found.

    With ``settings`` (what ``apply`` would run with: allowed roots, plugin settings) each
    plugin checks its own values too, such as a ``Local::*`` path outside the allowed roots.
    ``strict``: a repeated mapping key is an error, not a note.
    """
    import datetime

    from converge.cli.inputs import read_inputs
    from converge.core.template import (
        StackIdentity,
        load_environment,
        load_template,
        merge_environments,
    )
    from converge.engine.validation import prepare_definition
    from converge.errors import TemplateError
    from converge.resources.registry import default_registry

    try:
        inputs = read_inputs(template_path, environment_paths)
        template = load_template(inputs.template.text, inputs.template.filename, strict=strict)
        environments = [
            load_environment(source.text, source.filename, strict=strict)
            for source in inputs.environments
        ]
        definition = prepare_definition(
            template,
            environment=merge_environments(environments),
            parameters=parameters,
            files=inputs.files,
            identity=StackIdentity(template_path.stem, "validate", "validate"),
            registry=default_registry(),
            settings=settings,
            now=datetime.datetime.now(datetime.UTC),
            require_values=False,
        )
    except TemplateError as exc:
        return None, _sorted_errors(exc)
    return definition, []


def _table(definition: StackDefinition, name: str) -> str:
    summary = _summary(definition)
    lines = [f"{name}: valid ({summary['version_key']} {summary['version']})"]
    lines.append(f"resources: {len(summary['resources'])}")
    by_type: dict[str, list[str]] = {}
    for resource, kind in summary["resources"].items():
        by_type.setdefault(kind, []).append(resource)
    for kind, names in sorted(by_type.items()):
        lines.append(
            f"  {kind}: {len(names)} ({', '.join(names[:5])}{', …' if len(names) > 5 else ''})"
        )
    lines.append(f"parameters: {len(summary['parameters'])}")
    for key, value in summary["parameters"].items():
        lines.append(f"  {key} = {json.dumps(value)}")
    lines.append(f"outputs: {len(summary['outputs'])}")
    if summary["outputs"]:
        lines.append("  " + ", ".join(summary["outputs"]))
    lines.extend(f"note: {note}" for note in summary["notes"])
    return "\n".join(lines)


def _report(
    template: Path, definition: StackDefinition | None, errors: list[TemplateError]
) -> dict[str, Any]:
    report: dict[str, Any] = {"template": str(template), "valid": definition is not None}
    report["errors"] = [error.as_dict() for error in errors]
    if definition is not None:
        report.update(_summary(definition))
    return report


@click.command()
@click.argument(
    "templates",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@click.option(
    "-e",
    "--environment",
    "environments",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="An environment file; repeat to merge several, later ones win.",
)
@click.option(
    "-P", "--parameter", "parameters", multiple=True, metavar="KEY=VALUE", help="A parameter value."
)
@click.option(
    "--strict",
    is_flag=True,
    help="Refuse a key repeated in a mapping (Heat keeps the last one; so does converge, "
    "with a note).",
)
@click.option(
    "-f",
    "--format",
    "output_format",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
)
@click.option(
    "--state",
    envvar="CONVERGE_STATE",
    default="converge.db",
    show_default=True,
    type=click.Path(dir_okay=False),
    help="The state file apply would use: Local::* paths must lie in its directory "
    "(env CONVERGE_STATE).",
)
def validate(
    templates: tuple[Path, ...],
    environments: tuple[Path, ...],
    parameters: tuple[str, ...],
    strict: bool,
    output_format: str,
    state: str,
) -> None:
    """Check each TEMPLATE without creating anything: prints each problem as
    ``file:line: path: message`` or a summary. Exit status 1 when any template has a
    problem. Parameters need no values here; ``plan`` and ``apply`` ask for them."""
    from converge.cli.inputs import embedded_settings

    values = _parameters(parameters)
    settings = embedded_settings(state)
    reports: list[dict[str, Any]] = []
    failed = False
    for index, template in enumerate(templates):
        definition, errors = run_validate(
            template, list(environments), values, settings, strict=strict
        )
        failed = failed or definition is None
        if output_format == "json":
            reports.append(_report(template, definition, errors))
            continue
        if index:
            click.echo()
        if definition is not None:
            click.echo(_table(definition, str(template)))
        else:
            for error in errors:
                click.echo(error.format())
    if output_format == "json":
        # one template: its report, as before; several: a list of them
        click.echo(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2, default=str))
    if failed:
        raise SystemExit(1)
