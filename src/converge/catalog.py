"""What converge can do, in Heat's documents: resource types and their schemas, HOT versions
and their functions, and a validated template's parameters.

Plain functions over the plugin registry and prepared templates (no store, no I/O), so the
REST API and the Python API show the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from converge.core.schema import PropertySchema, PropertyType, ResourceTypeSchema
from converge.core.template import (
    Environment,
    ParameterSchema,
    StackDefinition,
    Template,
    load_template,
)
from converge.core.template.parameters import parameter_schemas
from converge.core.template.versions import VERSIONS, HotVersion
from converge.errors import InvalidRequest, NotFound

# Heat's support statuses; every converge type is SUPPORTED.
SUPPORT_STATUSES = ("UNKNOWN", "SUPPORTED", "DEPRECATED", "UNSUPPORTED", "HIDDEN")
_SUPPORTED = {"status": "SUPPORTED", "version": None, "message": None, "previous_status": None}

# Heat's names for parameter types in validate's answer.
_PARAMETER_TYPES = {
    "string": "String",
    "number": "Number",
    "comma_delimited_list": "CommaDelimitedList",
    "json": "Json",
    "boolean": "Boolean",
}


def resource_types(
    schemas: Mapping[str, ResourceTypeSchema],
    *,
    support_status: str | None = None,
    name: str | None = None,
    with_description: bool = False,
) -> list[Any]:
    """Heat's ``/resource_types``: names (or name and description), filtered."""
    if support_status is not None and support_status not in SUPPORT_STATUSES:
        raise InvalidRequest(
            f"invalid support_status {support_status!r}: use one of {', '.join(SUPPORT_STATUSES)}"
        )
    if support_status not in (None, "SUPPORTED"):
        return []
    names = sorted(schemas)
    if name is not None:
        names = [n for n in names if name in n]
    if with_description:
        return [
            {"resource_type": n, "description": _first_line(schemas[n].description)} for n in names
        ]
    return names


def resource_schema(
    schema: ResourceTypeSchema, *, with_description: bool = False
) -> dict[str, Any]:
    """Heat's ``/resource_types/{type}``: properties, attributes and support status."""
    document: dict[str, Any] = {
        "resource_type": schema.type_name,
        "properties": {name: _property(p) for name, p in schema.properties.items()},
        "attributes": {
            name: {"type": str(a.type), "description": a.description}
            for name, a in schema.attributes.items()
        },
        "support_status": dict(_SUPPORTED),
    }
    if with_description:
        document["description"] = schema.description
    return document


def _property(schema: PropertySchema) -> dict[str, Any]:
    document: dict[str, Any] = {
        "type": str(schema.type),
        "description": schema.description,
        "required": schema.required,
        "update_allowed": schema.update_allowed,
        "immutable": schema.immutable,
    }
    if schema.default is not None:
        document["default"] = schema.default
    if schema.constraints:
        document["constraints"] = [
            {c.kind: c.value, **({"description": c.description} if c.description else {})}
            for c in schema.constraints
        ]
    if schema.item_schema is not None:
        document["schema"] = {"*": _property(schema.item_schema)}
    elif schema.map_schema is not None:
        document["schema"] = {name: _property(p) for name, p in schema.map_schema.items()}
    return document


_HOT_PARAMETER = {
    PropertyType.STRING: "string",
    PropertyType.INTEGER: "number",
    PropertyType.NUMBER: "number",
    PropertyType.BOOLEAN: "boolean",
    PropertyType.LIST: "comma_delimited_list",
    PropertyType.MAP: "json",
    PropertyType.ANY: "json",
}


def generate_template(schema: ResourceTypeSchema, template_type: str = "hot") -> dict[str, Any]:
    """Heat's ``/resource_types/{type}/template``: a HOT template using the type, each
    property a parameter and each attribute an output."""
    if template_type != "hot":
        raise InvalidRequest(
            f"template_type {template_type!r} is not supported: converge speaks HOT only "
            "(template_type=hot)"
        )
    parameters: dict[str, Any] = {}
    for name, prop in schema.properties.items():
        parameter: dict[str, Any] = {
            "type": _HOT_PARAMETER[prop.type],
            "description": prop.description,
        }
        if prop.default is not None:
            parameter["default"] = prop.default
        parameters[name] = parameter
    return {
        "heat_template_version": "2016-10-14",
        "description": f"Initial template of {schema.type_name}",
        "parameters": parameters,
        "resources": {
            schema.type_name: {
                "type": schema.type_name,
                "properties": {name: {"get_param": name} for name in schema.properties},
            }
        },
        "outputs": {
            name: {
                "description": attribute.description,
                "value": {"get_attr": [schema.type_name, name]},
            }
            for name, attribute in schema.attributes.items()
        },
    }


def template_versions() -> list[dict[str, Any]]:
    """Heat's ``/template_versions``."""
    return [
        {
            "version": f"heat_template_version.{version.date}",
            "type": "hot",
            "aliases": [f"heat_template_version.{version.name}"] if version.name else [],
        }
        for version in VERSIONS
    ]


def find_version(label: str) -> HotVersion:
    """A version from Heat's label (``heat_template_version.2016-10-14``, or its name)."""
    key = label.split(".", 1)[1] if label.startswith("heat_template_version.") else label
    for version in VERSIONS:
        if key in (version.date, version.name):
            return version
    raise NotFound(f"template version {label!r} not found (see /template_versions)")


def template_functions(label: str, *, with_condition_func: bool = False) -> list[dict[str, str]]:
    """Heat's ``/template_versions/{version}/functions``."""
    version = find_version(label)
    table = dict(version.functions)
    if with_condition_func:
        table.update(version.condition_functions)
    return [
        {"functions": name, "description": _first_line(function.__doc__ or "")}
        for name, function in sorted(table.items())
    ]


def validation_result(
    template: Template,
    definition: StackDefinition,
    environment: Environment,
    *,
    files: Mapping[str, str] | None = None,
    show_nested: bool = False,
) -> dict[str, Any]:
    """Heat's answer to ``/validate``: the description, parameters and parameter groups;
    with ``show_nested``, those of each provider template resource (``NestedParameters``)."""
    schemas, _ = parameter_schemas(template)
    result: dict[str, Any] = {
        "Description": definition.description or "No description",
        "Parameters": {
            name: _parameter(schema, definition.parameters.get(name))
            for name, schema in schemas.items()
        },
        "ParameterGroups": list(template.data.get("parameter_groups") or []),
        "Environment": environment.to_data(),
    }
    if show_nested:
        nested: dict[str, Any] = {}
        for name, resource in definition.resources.items():
            key = resource.provider_template
            if key is None or key not in (files or {}):
                continue
            inner = load_template((files or {})[key], key)
            inner_schemas, _ = parameter_schemas(inner)
            nested[name] = {
                "Type": resource.type,
                "Description": str(inner.data.get("description") or "No description"),
                "Parameters": {n: _parameter(p, None) for n, p in inner_schemas.items()},
                "ParameterGroups": list(inner.data.get("parameter_groups") or []),
            }
        if nested:
            result["NestedParameters"] = nested
    return result


def _parameter(schema: ParameterSchema, value: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "Type": _PARAMETER_TYPES.get(str(schema.type), str(schema.type)),
        "Label": schema.label or schema.name,
        "Description": schema.description,
        "NoEcho": "true" if schema.hidden else "false",
    }
    if schema.has_default:
        document["Default"] = "******" if schema.hidden else schema.default
    if value is not None and not schema.hidden:
        document["Value"] = value
    for constraint in schema.constraints:
        key = {
            "allowed_values": "AllowedValues",
            "allowed_pattern": "AllowedPattern",
            "custom_constraint": "CustomConstraint",
        }.get(constraint.kind)
        if key is not None:
            document[key] = constraint.value
        elif constraint.kind == "length":
            document.update(_bounds(constraint.value, "Length"))
        elif constraint.kind == "range":
            document.update(_bounds(constraint.value, "Value"))
        if constraint.description:
            document["ConstraintDescription"] = constraint.description
    return document


def _bounds(value: Any, word: str) -> dict[str, Any]:
    bounds = value if isinstance(value, Mapping) else {}
    return {f"{edge.title()}{word}": bounds[edge] for edge in ("min", "max") if edge in bounds}


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text.strip() else ""
