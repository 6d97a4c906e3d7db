"""What the CLI shows: Rich tables for people, JSON with Heat's field names for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Protocol, TypeVar

import click
import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

# Wide enough that ids and reasons stay on one line when output goes to a file or a pipe.
_PIPE_WIDTH = 200


class Format(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"
    VALUE = "value"  # values only, as ``openstack … -f value`` prints them


def is_document(fmt: str) -> bool:
    """Whether ``fmt`` is for scripts (no live progress, one final document)."""
    return fmt != Format.TABLE


class HasDict(Protocol):
    def as_dict(self) -> dict[str, Any]: ...


F = TypeVar("F", bound=Callable[..., Any])


def format_option(function: F) -> F:
    """The ``-f/--format table|json`` option every command takes."""
    decorator = click.option(
        "-f",
        "--format",
        "output_format",
        type=click.Choice([f.value for f in Format]),
        default=Format.TABLE.value,
        show_default=True,
        help="table for people; json or yaml (Heat's field names) or value (values only, "
        "one row a line) for scripts.",
    )
    return decorator(function)


def column_option(function: F) -> F:
    """``-c/--column NAME`` (repeatable): only these fields, as ``openstack`` commands do."""
    decorator = click.option(
        "-c",
        "--column",
        "columns",
        multiple=True,
        metavar="COLUMN",
        help="Show only this field (Heat's field name); repeat for more.",
    )
    return decorator(function)


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def make_console(*, stderr: bool = False) -> Console:
    """A console on the current stdout/stderr (looked up now, so test runners capture it)."""
    stream = sys.stderr if stderr else sys.stdout
    terminal = stream.isatty()
    return Console(
        file=stream,
        width=None if terminal else _PIPE_WIDTH,
        force_terminal=terminal,
        no_color=not terminal,
        highlight=False,
        soft_wrap=not terminal,
    )


def to_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=False, default=str)


def print_json(data: Any) -> None:
    click.echo(to_json(data))


def select_columns(data: Any, columns: Sequence[str]) -> Any:
    """Only ``columns`` of a document or of each row of a list; unknown names are refused."""
    if not columns:
        return data
    rows = data if isinstance(data, list) else [data]
    known: list[str] = list(rows[0]) if rows and isinstance(rows[0], Mapping) else []
    unknown = [c for c in columns if known and c not in known]
    if unknown:
        raise click.UsageError(
            f"no column {', '.join(map(repr, unknown))}: choose from {', '.join(known)}"
        )
    picked = [{c: row.get(c) for c in columns} for row in rows if isinstance(row, Mapping)]
    return picked if isinstance(data, list) else (picked[0] if picked else data)


def value_text(value: Any) -> str:
    """A value as ``-f value`` prints it: strings as they are, the rest as compact JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, separators=(",", ":"))


def print_document(data: Any, fmt: str, columns: Sequence[str] = ()) -> None:
    """``data`` (a document or a list of rows) as JSON, YAML or bare values."""
    data = select_columns(data, columns)
    if fmt == Format.YAML:
        plain = json.loads(to_json(data))  # what JSON would show: dates and enums as text
        click.echo(
            yaml.dump(plain, Dumper=_YamlDumper, sort_keys=False, allow_unicode=True), nl=False
        )
    elif fmt == Format.VALUE:
        rows = data if isinstance(data, list) else [data]
        for row in rows:
            if isinstance(row, Mapping):
                if isinstance(data, list):
                    click.echo(" ".join(value_text(v) for v in row.values()))
                else:
                    for value in row.values():  # one field a line, as ``openstack show``
                        click.echo(value_text(value))
            else:
                click.echo(value_text(row))
    else:
        print_json(data)


class _YamlDumper(yaml.SafeDumper):
    """Safe YAML with text of several lines (a content diff) as a literal block."""


def _represent_text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_YamlDumper.add_representer(str, _represent_text)


def emit(data: Any, fmt: str, columns: Sequence[str], show: Callable[[Any], None]) -> None:
    """A reading command's result: ``show`` draws it for people, else a document."""
    if is_document(fmt):
        print_document(data, fmt, columns)
    elif columns:
        selected = select_columns(data, columns)
        print_table(plain_table(selected if isinstance(selected, list) else [selected]))
    else:
        show(data)


def plain_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """Rows of chosen fields, one column each."""
    table = Table()
    names = list(rows[0]) if rows else []
    for name in names:
        table.add_column(name, overflow="fold")
    for row in rows:
        table.add_row(*(short_value(row.get(name), limit=400) for name in names))
    return table


def print_table(table: Table) -> None:
    """A table on a terminal; on a pipe or a file, plain lines (``| tail -5`` stays whole):
    a header line, then one line a row, fields separated by two spaces, nothing cut."""
    if stdout_is_terminal():
        make_console().print(table)
        return
    columns = table.columns
    cells = [[_plain(cell) for cell in column.cells] for column in columns]
    click.echo("  ".join(_plain(column.header) for column in columns).rstrip())
    for row in zip(*cells, strict=True):
        click.echo("  ".join(row).rstrip())


def _plain(cell: Any) -> str:
    text = cell.plain if isinstance(cell, Text) else str(cell)
    return " ".join(text.split())  # one line: newlines inside a cell would split the row


def dicts(items: Iterable[HasDict]) -> list[dict[str, Any]]:
    return [item.as_dict() for item in items]


# --- statuses -------------------------------------------------------------------------------


def status_style(state: str) -> str:
    """The colour of a Heat state: red failed, yellow in progress, green complete."""
    if state.endswith("FAILED"):
        return "bold red"
    if state.endswith("IN_PROGRESS"):
        return "yellow"
    if state.startswith(("ROLLBACK", "DELETE")) and state.endswith("COMPLETE"):
        return "cyan"
    if state.endswith("COMPLETE"):
        return "green"
    return ""


def styled_status(state: str) -> Text:
    return Text(state, style=status_style(state))


def short_value(value: Any, limit: int = 80) -> str:
    """A value on one table cell: strings as they are, the rest as compact JSON."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- tables ---------------------------------------------------------------------------------


def stack_table(stack: Mapping[str, Any]) -> Table:
    """One stack as field/value rows (``converge show``)."""
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for key in (
        "stack_name",
        "id",
        "stack_status",
        "stack_status_reason",
        "creation_time",
        "updated_time",
        "disable_rollback",
        "timeout_mins",
        "drift_policy",
        "tags",
        "parent",
    ):
        value = stack.get(key)
        if key == "parent" and value is None:
            continue
        if key == "stack_status":
            table.add_row(key, styled_status(str(value)))
        elif key == "tags":
            table.add_row(key, ", ".join(value or []))
        else:
            table.add_row(key, "" if value is None else str(value))
    for name, value in sorted((stack.get("parameters") or {}).items()):
        table.add_row(f"parameters.{name}", short_value(value))
    return table


def stacks_table(stacks: Sequence[Mapping[str, Any]]) -> Table:
    table = Table(title=None)
    for column in ("stack_name", "stack_status", "creation_time", "updated_time", "id"):
        table.add_column(column, overflow="fold")
    for stack in stacks:
        table.add_row(
            stack["stack_name"],
            styled_status(stack["stack_status"]),
            stack.get("creation_time") or "",
            stack.get("updated_time") or "",
            stack["id"],
        )
    return table


def resources_table(resources: Sequence[Mapping[str, Any]]) -> Table:
    table = Table()
    for column in (
        "resource_name",
        "resource_type",
        "resource_status",
        "physical_resource_id",
        "drift_status",
        "updated_time",
    ):
        table.add_column(column, overflow="fold")
    for resource in sorted(resources, key=lambda r: (r["resource_name"], r.get("id", 0))):
        table.add_row(
            resource["resource_name"],
            resource["resource_type"],
            styled_status(resource["resource_status"]),
            resource.get("physical_resource_id") or "",
            resource.get("drift_status") or "",
            resource.get("updated_time") or "",
        )
    return table


def event_line(event: Mapping[str, Any]) -> Text:
    """One event on one line: ``time  resource  STATE  reason``."""
    time = (event.get("event_time") or "")[11:19]
    line = Text()
    line.append(f"{time}  ", style="dim")
    line.append(f"{event['resource_name']}  ", style="bold")
    line.append(event["resource_status"], style=status_style(event["resource_status"]))
    reason = event.get("resource_status_reason") or ""
    if reason:
        line.append(f"  {reason}")
    return line


def events_table(events: Sequence[Mapping[str, Any]]) -> Table:
    table = Table()
    for column in (
        "event_time",
        "resource_name",
        "resource_status",
        "resource_status_reason",
        "physical_resource_id",
    ):
        table.add_column(column, overflow="fold")
    for event in events:
        table.add_row(
            event.get("event_time") or "",
            event["resource_name"],
            styled_status(event["resource_status"]),
            event.get("resource_status_reason") or "",
            event.get("physical_resource_id") or "",
        )
    return table


def print_events(events: Sequence[Mapping[str, Any]]) -> None:
    """The events table on a terminal; elsewhere one whole line per event (``| tail -5``)."""
    if stdout_is_terminal():
        make_console().print(events_table(events))
        return
    for event in events:
        line = event_line(event)
        physical = event.get("physical_resource_id")
        click.echo(line.plain + (f"  [{physical}]" if physical else ""))


def outputs_table(outputs: Sequence[Mapping[str, Any]]) -> Table:
    table = Table()
    for column in ("output_key", "output_value", "description"):
        table.add_column(column, overflow="fold")
    for output in sorted(outputs, key=lambda o: str(o.get("output_key"))):
        value: Any = output.get("output_value")
        cell: str | Text = short_value(value, limit=400)
        if output.get("output_error"):
            cell = Text(f"error: {output['output_error']}", style="red")
        table.add_row(str(output.get("output_key")), cell, output.get("description") or "")
    return table


PLAN_ORDER = ("CREATE", "UPDATE", "REPLACE", "DELETE", "NOTHING")
_PLAN_STYLE = {
    "CREATE": "green",
    "UPDATE": "yellow",
    "REPLACE": "bold magenta",
    "DELETE": "red",
    "NOTHING": "dim",
}


def plan_table(changes: Sequence[Mapping[str, Any]]) -> Table:
    table = Table()
    for column in ("action", "resource_name", "resource_type", "reason", "changes (old → new)"):
        table.add_column(column, overflow="fold")
    for change in sorted(
        changes, key=lambda c: (PLAN_ORDER.index(c["action"]), c["resource_name"])
    ):
        action = change["action"]
        table.add_row(
            Text(action, style=_PLAN_STYLE.get(action, "")),
            change["resource_name"],
            change["resource_type"],
            change.get("reason") or "",
            property_changes(change),
        )
    return table


def property_changes(change: Mapping[str, Any]) -> str:
    """``value: 'a' → 'b'; size: 1 → 2``: every changed property, old then new."""
    detail: Mapping[str, Any] = change.get("property_changes") or {}
    names = change.get("changed_properties") or list(detail)
    parts = []
    for name in names:
        if name in detail:
            old, new = detail[name].get("old"), detail[name].get("new")
            parts.append(f"{name}: {short_value(old, 40)} → {short_value(new, 40)}")
        else:
            parts.append(str(name))
    return "; ".join(parts)


def plan_summary(changes: Sequence[Mapping[str, Any]]) -> str:
    """``Plan: 1 to create, 2 to update, 0 to replace, 1 to delete, 3 unchanged.``"""
    counts = {action: 0 for action in PLAN_ORDER}
    for change in changes:
        counts[change["action"]] = counts.get(change["action"], 0) + 1
    return (
        f"Plan: {counts['CREATE']} to create, {counts['UPDATE']} to update, "
        f"{counts['REPLACE']} to replace, {counts['DELETE']} to delete, "
        f"{counts['NOTHING']} unchanged."
    )
