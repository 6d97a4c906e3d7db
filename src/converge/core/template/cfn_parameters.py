"""A CFN template's ``Parameters`` read into the same ``ParameterSchema`` as HOT's.

CFN writes a parameter flat (``Type: String``, ``MinLength: 1``, ``AllowedValues: [...]``,
``NoEcho: 'true'``); Heat's ``Schema.from_dict`` turns those keys into its constraints,
and so does this module: ``MinLength``/``MaxLength`` -> length, ``MinValue``/``MaxValue``
-> range, ``ConstraintDescription`` the message of each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from converge.core.schema import Constraint, constraint_shape_problem
from converge.core.template.nodes import Where
from converge.core.template.template import Template, did_you_mean
from converge.core.template.versions import CFN_PARAMETER_KEYS
from converge.errors import TemplateError

if TYPE_CHECKING:
    from converge.core.template.parameters import ParameterType

CFN_PSEUDO_PARAMETERS = ("AWS::StackName", "AWS::StackId", "AWS::Region")
# Heat's AWS::Region: a fixed answer, one of the regions its AllowedValues list.
CFN_REGION = "ap-southeast-1"

_TYPES = {
    "String": "string",
    "Number": "number",
    "CommaDelimitedList": "comma_delimited_list",
    "Json": "json",
    "Boolean": "boolean",
}
# (constraint kind, its CFN keys as (min, max) or one key)
_BOUNDS = (("length", "MinLength", "MaxLength"), ("range", "MinValue", "MaxValue"))


def _constraints(
    raw: dict[str, Any], kind: ParameterType, where: Where
) -> tuple[tuple[Constraint, ...], list[TemplateError]]:
    # imported here: parameters.py reads a CFN template's parameters through this module
    from converge.core.template.parameters import constraint_kinds_for

    description = raw.get("ConstraintDescription")
    message = str(description) if description is not None else None
    found: list[tuple[str, Any, Where]] = []
    for name, low, high in _BOUNDS:
        if low in raw or high in raw:
            bounds = {
                bound: raw[key]
                for bound, key in (("min", low), ("max", high))
                if raw.get(key) is not None
            }
            found.append((name, bounds, where.child(low if low in raw else high)))
    if "AllowedValues" in raw:
        found.append(("allowed_values", raw["AllowedValues"], where.child("AllowedValues")))
    if "AllowedPattern" in raw:
        found.append(("allowed_pattern", raw["AllowedPattern"], where.child("AllowedPattern")))
    constraints: list[Constraint] = []
    errors: list[TemplateError] = []
    allowed = constraint_kinds_for(kind)
    for name, value, at in found:
        key = at.path[-1]
        if name not in allowed:
            errors.append(at.error(f"{key} is not valid for a {raw.get('Type')} parameter"))
            continue
        constraint = Constraint(name, value, message)
        problem = constraint_shape_problem(constraint)
        if problem is not None:
            errors.append(at.error(f"{key}: {problem}"))
            continue
        constraints.append(constraint)
    return tuple(constraints), errors


def cfn_parameter_schemas(template: Template) -> tuple[dict[str, Any], list[TemplateError]]:
    """The ``Parameters`` of a CFN template as ``ParameterSchema``s, and every problem."""
    from converge.core.template.parameters import ParameterSchema, ParameterType

    schemas: dict[str, ParameterSchema] = {}
    errors: list[TemplateError] = []
    section = template.section_where("parameters")
    for name, raw in template.parameters.items():
        where = section.child(name)
        if not isinstance(name, str) or not name:
            errors.append(section.error(f"parameter name {name!r} must be a string"))
            continue
        if name in CFN_PSEUDO_PARAMETERS:
            errors.append(where.error(f"{name} is a pseudo parameter and cannot be declared"))
            continue
        if not isinstance(raw, dict):
            errors.append(where.error("a parameter must be a map with at least a Type"))
            continue
        for key in raw:
            if key not in CFN_PARAMETER_KEYS:
                hint = did_you_mean(key, CFN_PARAMETER_KEYS)
                errors.append(where.child(key).error(f"unknown key {key!r}{hint}"))
        raw_type = raw.get("Type")
        if raw_type is None:
            errors.append(where.error(f"missing Type ({', '.join(_TYPES)})"))
            continue
        if not isinstance(raw_type, str) or raw_type not in _TYPES:
            errors.append(
                where.child("Type").error(
                    f"unknown parameter Type {raw_type!r}{did_you_mean(raw_type, _TYPES)}; "
                    f"expected one of: {', '.join(_TYPES)}"
                )
            )
            continue
        kind = ParameterType(_TYPES[raw_type])
        constraints, problems = _constraints(raw, kind, where)
        errors.extend(problems)
        description = raw.get("Description")
        schema = ParameterSchema(
            name=name,
            type=kind,
            where=where,
            default=raw.get("Default"),
            has_default=raw.get("Default") is not None,
            # Heat: str(NoEcho).lower() == 'true'; anything else shows the value
            hidden=str(raw.get("NoEcho", "false")).lower() == "true",
            label=str(raw["Label"]) if raw.get("Label") is not None else None,
            description=str(description) if description is not None else "",
            constraints=constraints,
            default_key="Default",
        )
        if schema.has_default and not problems:
            try:
                schema = replace(schema, default=schema.coerce(schema.default))
            except ValueError as exc:
                schema = replace(schema, default_problem=f"invalid Default: {exc}")
        schemas[name] = schema
    return schemas, errors
