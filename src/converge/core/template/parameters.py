"""Template parameters: their declarations, Heat's coercion rules and where values come from.

Values come, highest first, from the request (``-P`` / the API), the environment's
``parameters``, the environment's ``parameter_defaults`` and the template's ``default``.
A hidden parameter's value never appears in a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from converge.core.bounded_json import parse_json
from converge.core.custom_constraints import NO_CONTEXT, ConstraintContext
from converge.core.schema import (
    Constraint,
    check_constraints,
    constraint_shape_problem,
    to_boolean,
    to_number,
    to_string,
    type_word,
)
from converge.core.template.cfn_parameters import cfn_parameter_schemas
from converge.core.template.nodes import Where
from converge.core.template.template import Template, did_you_mean
from converge.errors import TemplateError

PSEUDO_PARAMETERS = ("OS::stack_name", "OS::stack_id", "OS::project_id")


class ParameterType(StrEnum):
    STRING = "string"
    NUMBER = "number"
    COMMA_DELIMITED_LIST = "comma_delimited_list"
    JSON = "json"
    BOOLEAN = "boolean"


# Which constraint kinds make sense for which parameter type (as Heat checks: a json
# parameter is a map, which no custom constraint takes).
_CONSTRAINTS_FOR: Mapping[ParameterType, frozenset[str]] = {
    ParameterType.STRING: frozenset(
        {"length", "allowed_values", "allowed_pattern", "custom_constraint"}
    ),
    ParameterType.NUMBER: frozenset({"range", "modulo", "allowed_values", "custom_constraint"}),
    ParameterType.COMMA_DELIMITED_LIST: frozenset(
        {"length", "allowed_values", "allowed_pattern", "custom_constraint"}
    ),
    ParameterType.JSON: frozenset({"length", "allowed_values"}),
    ParameterType.BOOLEAN: frozenset({"allowed_values", "custom_constraint"}),
}


def constraint_kinds_for(kind: ParameterType) -> frozenset[str]:
    """The constraint kinds that make sense for a parameter type."""
    return _CONSTRAINTS_FOR[kind]


@dataclass(frozen=True)
class ParameterSchema:
    """One declared parameter."""

    name: str
    type: ParameterType
    where: Where = field(repr=False, compare=False)
    default: Any = None
    has_default: bool = False
    hidden: bool = False
    immutable: bool = False
    label: str | None = None
    description: str = ""
    tags: tuple[str, ...] = ()
    constraints: tuple[Constraint, ...] = ()
    # what is wrong with the default: an error only where the default is used (Heat's rule)
    default_problem: str | None = None
    default_key: str = "default"  # how the template spells it (a CFN template: Default)

    def coerce_type(self, value: Any) -> Any:
        """``value`` converted to the type by Heat's rules; ``ValueError`` with a message."""
        try:
            return _coerce(self.type, value)
        except ValueError as exc:
            if self.hidden:
                raise ValueError(f"the value is not a valid {self.type}") from None
            raise ValueError(str(exc)) from None

    def coerce(self, value: Any, context: ConstraintContext = NO_CONTEXT) -> Any:
        """``value`` converted by Heat's rules and checked; ``ValueError`` with a message."""
        coerced = self.coerce_type(value)
        problem = check_constraints(
            coerced, self.constraints, show_value=not self.hidden, context=context
        )
        if problem is not None:
            raise ValueError(problem)
        return coerced


def _coerce(kind: ParameterType, value: Any) -> Any:
    if kind is ParameterType.STRING:
        return to_string(value)
    if kind is ParameterType.NUMBER:
        return to_number(value)
    if kind is ParameterType.BOOLEAN:
        return to_boolean(value)
    if kind is ParameterType.COMMA_DELIMITED_LIST:
        if isinstance(value, list | tuple):
            return [
                item if isinstance(item, str) else _coerce(ParameterType.STRING, item)
                for item in value
            ]
        if isinstance(value, bool | int | float):
            value = _coerce(ParameterType.STRING, value)
        if not isinstance(value, str):
            raise ValueError(f"expected a comma-delimited string or a list, got {type_word(value)}")
        return [item.strip() for item in value.split(",")] if value.strip() else []
    # JSON: maps and lists, or their JSON text
    if isinstance(value, dict | list):
        return value
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            parsed = parse_json(value)
        except ValueError as exc:
            raise ValueError(f"not valid JSON: {exc}") from None
        if isinstance(parsed, dict | list):
            return parsed
    raise ValueError(f"expected a JSON map or list, got {type_word(value)}")


def _constraints(
    raw: Any, kind: ParameterType, template: Template, where: Where
) -> tuple[tuple[Constraint, ...], list[TemplateError]]:
    if raw is None:
        return (), []
    if not isinstance(raw, list):
        return (), [where.error("constraints must be a list")]
    constraints: list[Constraint] = []
    errors: list[TemplateError] = []
    allowed = template.version.parameter_constraints
    for index, entry in enumerate(raw):
        at = where.child(index)
        if not isinstance(entry, dict):
            errors.append(at.error("a constraint must be a map such as {length: {min: 1}}"))
            continue
        description = entry.get("description")
        kinds = [key for key in entry if key != "description"]
        if len(kinds) != 1:
            errors.append(at.error("a constraint needs exactly one kind (and a description)"))
            continue
        name = kinds[0]
        if name not in allowed:
            errors.append(
                at.child(name).error(
                    f"unknown constraint {name!r}{did_you_mean(name, allowed)} "
                    f"for heat_template_version {template.version.date}"
                )
            )
            continue
        if name not in _CONSTRAINTS_FOR[kind]:
            errors.append(at.child(name).error(f"{name} is not valid for a {kind} parameter"))
            continue
        constraint = Constraint(name, entry[name], str(description) if description else None)
        problem = constraint_shape_problem(constraint)
        if problem is not None:
            errors.append(at.child(name).error(problem))
            continue
        constraints.append(constraint)
    return tuple(constraints), errors


def parameter_schemas(template: Template) -> tuple[dict[str, ParameterSchema], list[TemplateError]]:
    """The template's parameter declarations, and every problem in them."""
    if template.version.is_cfn:
        return cfn_parameter_schemas(template)
    schemas: dict[str, ParameterSchema] = {}
    errors: list[TemplateError] = []
    section = template.where.child("parameters")
    keys = template.version.parameter_keys
    for name, raw in template.parameters.items():
        where = section.child(name)
        if not isinstance(name, str) or not name:
            errors.append(section.error(f"parameter name {name!r} must be a string"))
            continue
        if name in PSEUDO_PARAMETERS:
            errors.append(where.error(f"{name} is a pseudo parameter and cannot be declared"))
            continue
        if not isinstance(raw, dict):
            errors.append(where.error("a parameter must be a map with at least a type"))
            continue
        unknown = [key for key in raw if key not in keys]
        for key in unknown:
            errors.append(where.child(key).error(f"unknown key {key!r}{did_you_mean(key, keys)}"))
        raw_type = raw.get("type")
        if raw_type is None:
            errors.append(
                where.error("missing type (string, number, comma_delimited_list, json or boolean)")
            )
            continue
        try:
            kind = ParameterType(raw_type)
        except ValueError:
            choices = [member.value for member in ParameterType]
            errors.append(
                where.child("type").error(
                    f"unknown parameter type {raw_type!r}{did_you_mean(raw_type, choices)}; "
                    f"expected one of: {', '.join(choices)}"
                )
            )
            continue
        constraints, problems = _constraints(
            raw.get("constraints"), kind, template, where.child("constraints")
        )
        errors.extend(problems)
        flags: dict[str, bool] = {}
        for flag in ("hidden", "immutable"):
            try:
                flags[flag] = to_boolean(raw.get(flag, False))
            except ValueError as exc:
                errors.append(where.child(flag).error(str(exc)))
                flags[flag] = False
        tags = raw.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
            errors.append(where.child("tags").error("tags must be a list of strings"))
            tags = []
        schema = ParameterSchema(
            name=name,
            type=kind,
            where=where,
            default=raw.get("default"),
            has_default="default" in raw and raw["default"] is not None,
            hidden=flags["hidden"],
            immutable=flags["immutable"],
            label=str(raw["label"]) if raw.get("label") is not None else None,
            description=str(raw.get("description") or ""),
            tags=tuple(tags),
            constraints=constraints,
        )
        if schema.has_default and not problems:
            try:
                schema = replace(schema, default=schema.coerce(schema.default))
            except ValueError as exc:
                schema = replace(schema, default_problem=f"invalid default: {exc}")
        schemas[name] = schema
    errors.extend(_check_groups(template, schemas))
    return schemas, errors


def _coerced(schema: ParameterSchema, value: Any) -> Any:
    try:
        return schema.coerce(value)
    except ValueError:
        return value


def _check_groups(
    template: Template, schemas: Mapping[str, ParameterSchema]
) -> list[TemplateError]:
    groups = template.data.get("parameter_groups") or []
    section = template.where.child("parameter_groups")
    errors: list[TemplateError] = []
    seen: set[str] = set()
    for index, group in enumerate(groups):
        where = section.child(index)
        if not isinstance(group, dict):
            errors.append(where.error("a parameter group must be a map with parameters"))
            continue
        names = group.get("parameters")
        if not isinstance(names, list):
            errors.append(where.error("a parameter group needs a list of parameters"))
            continue
        for position, name in enumerate(names):
            at = where.child("parameters", position)
            if not isinstance(name, str) or (
                name not in schemas and name not in template.parameters
            ):
                errors.append(
                    at.error(
                        f"the grouped parameter {name!r} does not reference a valid parameter"
                        f"{did_you_mean(name, schemas)}"
                    )
                )
            elif name in seen:
                errors.append(at.error(f"parameter {name!r} must be in one parameter group only"))
            else:
                seen.add(name)
    return errors


def _default_problems(schema: ParameterSchema, context: ConstraintContext) -> list[TemplateError]:
    """A default's custom constraints checked again, now with what some of them need."""
    if context is NO_CONTEXT or all(c.kind != "custom_constraint" for c in schema.constraints):
        return []
    try:
        schema.coerce(schema.default, context)
    except ValueError as exc:
        return [schema.where.child(schema.default_key).error(f"invalid default: {exc}")]
    return []


@dataclass(frozen=True)
class ParameterSource:
    """Values from one origin, with where to point at when one of them is wrong."""

    values: Mapping[str, Any]
    origin: str = "given"  # for messages: "given" (-P / API) or "from env.yaml"
    locations: Mapping[str, Where] = field(default_factory=dict)  # where each was written
    reject_unknown: bool = True
    labels: Mapping[str, str] = field(default_factory=dict)  # an origin per name, if its own


def resolve_parameters(
    schemas: Mapping[str, ParameterSchema],
    sources: list[ParameterSource],
    *,
    previous: Mapping[str, Any] | None = None,
    context: ConstraintContext = NO_CONTEXT,
    require_values: bool = True,
) -> tuple[dict[str, Any], list[TemplateError], list[TemplateError]]:
    """Final parameter values from ``sources`` (highest precedence first), problems, and
    warnings (an invalid default that a given value makes unused: Heat accepts it).

    ``previous``: the values of the stack being updated, for the immutable check.
    ``context``: what the constraints that need more than the value are checked with; the
    defaults, checked without it when the template was read, are checked again with it.
    ``require_values`` False (validate, as Heat's): a parameter with neither a value nor a
    default is left out of the values instead of being a problem.
    """
    errors: list[TemplateError] = []
    warnings: list[TemplateError] = []
    for source in sources:
        if not source.reject_unknown:
            continue
        for name in source.values:
            if name not in schemas:
                message = (
                    f"parameter {name!r} was not defined in the template"
                    f"{did_you_mean(name, schemas)}"
                )
                location = source.locations.get(name)
                errors.append(location.error(message) if location else TemplateError(message))
    values: dict[str, Any] = {}
    for name, schema in schemas.items():
        for source in sources:
            if name in source.values:
                raw = source.values[name]
                try:
                    values[name] = schema.coerce(raw, context)
                except ValueError as exc:
                    origin = source.labels.get(name, source.origin)
                    errors.append(
                        schema.where.error(f"invalid value {origin} for parameter {name!r}: {exc}")
                    )
                if schema.default_problem is not None:
                    where = schema.where.child(schema.default_key)
                    warnings.append(where.error(f"{schema.default_problem} (unused here)"))
                break
        else:
            if schema.default_problem is not None:
                errors.append(schema.where.child(schema.default_key).error(schema.default_problem))
            elif schema.has_default:
                values[name] = schema.default
                errors.extend(_default_problems(schema, context))
            elif require_values:
                errors.append(
                    schema.where.error(
                        f"parameter {name!r} needs a value: it has no default and none was given"
                    )
                )
    if previous is not None:
        changed = [
            name
            for name, schema in schemas.items()
            if schema.immutable
            and name in previous
            and name in values
            and values[name] != _coerced(schema, previous[name])
        ]
        if changed:
            errors.append(
                TemplateError(
                    "The following parameters are immutable and may not be updated: "
                    + ", ".join(changed)
                )
            )
    return values, errors, warnings
