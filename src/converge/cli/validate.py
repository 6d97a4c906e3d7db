"""``converge validate``: check a template with its environments and parameters, offline.

The files map (what ``get_file`` and provider templates read) is built from the files the
template references by ``get_file`` and the types it or the environments name as template
files (``type: server.yaml``, ``"My::Server": server.yaml``), read relative to the file that
names them and only from the template's directory or below it: validating a template must
not be a way to read arbitrary files.
"""

from __future__ import annotations

import datetime
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from converge.core.template import (
    Environment,
    StackDefinition,
    StackIdentity,
    load_environment,
    load_template,
    merge_environments,
)
from converge.core.template.environment import is_provider_template
from converge.core.template.loader import load_document
from converge.errors import TemplateError, TemplateErrors

if TYPE_CHECKING:
    from converge.engine.settings import EngineSettings

_HIDDEN = "******"


def _parameters(values: tuple[str, ...]) -> dict[str, str]:
    parameters: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint="-P")
        parameters[key] = value
    return parameters


def _referenced_files(data: Any) -> Iterator[str]:
    """``get_file`` keys and template-file resource types named anywhere in ``data``."""
    pending = [data]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if len(node) == 1 and isinstance(node.get("get_file"), str):
                yield node["get_file"]
            kind = node.get("type")
            if isinstance(kind, str) and is_provider_template(kind):
                yield kind
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


class _FilesMap:
    """Reads referenced files, refusing any outside ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.files: dict[str, str] = {}
        self.errors: list[TemplateError] = []

    def add(self, key: str, relative_to: Path, referrer: str) -> str | None:
        if key in self.files or "://" in key:
            return None
        path = (relative_to / key).resolve()
        if not path.is_relative_to(self.root):
            self.errors.append(
                TemplateError(
                    f"refusing to read {key!r}: it is outside the template's directory {self.root}",
                    file=referrer,
                )
            )
            return None
        try:
            self.files[key] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.errors.append(TemplateError(f"cannot read {key!r}: {exc}", file=referrer))
            return None
        return self.files[key]

    def add_tree(self, data: Any, relative_to: Path, referrer: str, depth: int = 0) -> None:
        for key in _referenced_files(data):
            content = self.add(key, relative_to, referrer)
            if content is not None and is_provider_template(key) and depth < 10:
                try:
                    nested, _ = load_document(content, key)
                except TemplateError:
                    continue  # reported when the provider template is validated
                self.add_tree(nested, (relative_to / key).parent, key, depth + 1)


def _summary(definition: StackDefinition) -> dict[str, Any]:
    types = Counter(resource.type for resource in definition.resources.values())
    return {
        "version": definition.version.date,
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
    errors = error.errors if isinstance(error, TemplateErrors) else [error]
    return sorted(errors, key=lambda e: (e.file or "", e.line or 0))


def run_validate(
    template_path: Path,
    environment_paths: list[Path],
    parameters: Mapping[str, str],
    settings: EngineSettings | None = None,
) -> tuple[StackDefinition | None, list[TemplateError]]:
    """Validate files on disk; the definition, or the problems found.

    With ``settings`` (what ``apply`` would run with: allowed roots, plugin settings) each
    plugin checks its own values too, such as a ``Local::*`` path outside the allowed roots.
    """
    # Plugins and the engine's checks load only when needed.
    from converge.engine.validation import prepare_definition
    from converge.resources.registry import default_registry

    name = str(template_path)
    files = _FilesMap(template_path.parent)
    try:
        template = load_template(template_path.read_bytes(), name)
        environments: list[Environment] = []
        for path in environment_paths:
            environment = load_environment(path.read_bytes(), str(path))
            environments.append(environment)
            for key in sorted(environment.provider_templates()):
                content = files.add(key, path.parent, str(path))
                if content is not None:
                    try:
                        nested, _ = load_document(content, key)
                    except TemplateError:
                        continue
                    files.add_tree(nested, (path.parent / key).parent, key)
        files.add_tree(template.data, template_path.parent, name)
        if files.errors:
            return None, files.errors
        definition = prepare_definition(
            template,
            environment=merge_environments(environments),
            parameters=parameters,
            files=files.files,
            identity=StackIdentity(template_path.stem, "validate", "validate"),
            registry=default_registry(),
            settings=settings,
            now=datetime.datetime.now(datetime.UTC),
        )
    except TemplateError as exc:
        return None, _sorted_errors(exc)
    return definition, []


def _table(definition: StackDefinition, name: str) -> str:
    summary = _summary(definition)
    lines = [f"{name}: valid (heat_template_version {summary['version']})"]
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


@click.command()
@click.argument("template", type=click.Path(exists=True, dir_okay=False, path_type=Path))
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
    template: Path,
    environments: tuple[Path, ...],
    parameters: tuple[str, ...],
    output_format: str,
    state: str,
) -> None:
    """Check TEMPLATE without creating anything: prints each problem as
    ``file:line: path: message`` (exit status 1) or a summary (exit status 0)."""
    from converge.cli.stack_commands import embedded_settings

    values = _parameters(parameters)
    definition, errors = run_validate(
        template, list(environments), values, settings=embedded_settings(state)
    )
    if output_format == "json":
        report: dict[str, Any] = {"valid": definition is not None}
        report["errors"] = [error.as_dict() for error in errors]
        if definition is not None:
            report.update(_summary(definition))
        click.echo(json.dumps(report, indent=2, default=str))
    elif definition is not None:
        click.echo(_table(definition, str(template)))
    else:
        for error in errors:
            click.echo(error.format())
    if definition is None:
        raise SystemExit(1)
