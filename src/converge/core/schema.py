"""What a resource type declares: its property and attribute schema (pure data)."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from converge.core.custom_constraints import (
    NO_CONTEXT,
    ConstraintContext,
    custom_constraint_name_problem,
    custom_constraint_problem,
)
from converge.core.hidden import SHOWN_AS
from converge.core.patterns import PatternError, compile_pattern, matches_whole


class PropertyType(StrEnum):
    STRING = "string"
    INTEGER = "integer"
    NUMBER = "number"
    BOOLEAN = "boolean"
    LIST = "list"
    MAP = "map"
    ANY = "any"


@dataclass(frozen=True)
class Constraint:
    """One of Heat's property constraints.

    ``kind`` is ``length``, ``range``, ``modulo``, ``allowed_values``, ``allowed_pattern`` or
    ``custom_constraint``; ``value`` holds its arguments as Heat writes them (``{"min": 1,
    "max": 5}``, a list, a regular expression, a constraint name); ``description`` replaces
    the default message when set.
    """

    kind: str
    value: Any
    description: str | None = None


@dataclass(frozen=True)
class PropertySchema:
    type: PropertyType
    description: str = ""
    required: bool = False
    default: Any = None
    constraints: tuple[Constraint, ...] = ()
    update_allowed: bool = False
    immutable: bool = False
    hidden: bool = False  # never shown in events, logs, show, outputs or errors
    # For LIST: the schema of every item; for MAP: the schema of named keys.
    item_schema: PropertySchema | None = None
    map_schema: Mapping[str, PropertySchema] | None = None


@dataclass(frozen=True)
class AttributeSchema:
    description: str = ""
    type: PropertyType = PropertyType.ANY


@dataclass(frozen=True)
class ResourceTypeSchema:
    """The declared surface of a resource type, as template validation sees it."""

    type_name: str
    properties: Mapping[str, PropertySchema] = field(default_factory=dict)
    attributes: Mapping[str, AttributeSchema] = field(default_factory=dict)
    description: str = ""
    # Any property name and value is accepted unvalidated, and changing one never forces a
    # replacement (Heat's OS::Heat::None, which stubs out any other type).
    open_properties: bool = False
    # Any attribute name is accepted: the type answers names it cannot list in advance.
    open_attributes: bool = False


class TypeSchemas(Protocol):
    """Looks up the schema of a (registry-mapped) resource type name; None when unknown."""

    def lookup(self, type_name: str) -> ResourceTypeSchema | None: ...

    def type_names(self) -> list[str]: ...


class StaticTypeSchemas:
    """A TypeSchemas over a fixed set of schemas (tests, validation without plugins)."""

    def __init__(self, schemas: Mapping[str, ResourceTypeSchema] | list[ResourceTypeSchema]):
        if isinstance(schemas, Mapping):
            self._schemas = dict(schemas)
        else:
            self._schemas = {schema.type_name: schema for schema in schemas}

    def lookup(self, type_name: str) -> ResourceTypeSchema | None:
        return self._schemas.get(type_name)

    def type_names(self) -> list[str]:
        return sorted(self._schemas)


# --- Checking values against a schema (shared by resource properties and parameters) -------

PathPart = str | int


@dataclass(frozen=True)
class Violation:
    """A value that does not fit its schema; ``path`` is relative to what was checked."""

    path: tuple[PathPart, ...]
    message: str


def _never_deferred(value: Any) -> bool:
    return False


def _never_concealed(value: Any) -> bool:
    return False


def _always_concealed(value: Any) -> bool:
    return True


_EXPECTED = {
    PropertyType.STRING: "a string",
    PropertyType.INTEGER: "an integer",
    PropertyType.NUMBER: "a number",
    PropertyType.BOOLEAN: "a boolean",
    PropertyType.LIST: "a list",
    PropertyType.MAP: "a map",
}


def type_word(value: Any) -> str:
    """A template author's word for a value's type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a map"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})


def to_string(value: Any) -> str:
    """Heat's string coercion: numbers and booleans are written out, nothing else is."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    raise ValueError(f"expected a string, got {type_word(value)}")


def to_boolean(value: Any) -> bool:
    """Heat's (oslo's strict) boolean parsing; ``ValueError`` for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int | str):
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ValueError(
        f"expected a boolean (true/false, yes/no, on/off, 1/0), got {type_word(value)}"
    )


def to_number(value: Any) -> int | float:
    """A number from a number or its text (``"3"`` -> 3, ``"2.5"`` -> 2.5)."""
    if isinstance(value, bool):
        raise ValueError("expected a number, got a boolean")
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError(f"expected a finite number, got {value!r}")
        return number
    raise ValueError(f"expected a number, got {type_word(value)}")


def to_integer(value: Any) -> int:
    try:
        number = to_number(value)
    except ValueError as exc:
        raise ValueError(str(exc).replace("a number", "an integer", 1)) from None
    if isinstance(number, float):
        raise ValueError(f"expected an integer, got {number!r}")
    return number


def _number_arg(args: Mapping[str, Any], key: str) -> int | float | None:
    value = args.get(key)
    return None if value is None else to_number(value)


def constraint_shape_problem(constraint: Constraint) -> str | None:
    """What is wrong with a constraint's own arguments (checked when a template is read)."""
    kind, args = constraint.kind, constraint.value
    try:
        if kind in ("length", "range"):
            if not isinstance(args, Mapping) or not set(args) <= {"min", "max"} or not args:
                return f"{kind} needs a map with min and/or max"
            _number_arg(args, "min"), _number_arg(args, "max")
        elif kind == "modulo":
            if not isinstance(args, Mapping) or set(args) != {"step", "offset"}:
                return "modulo needs a map with step and offset"
            step, offset = to_number(args["step"]), to_number(args["offset"])
            if step == 0:
                return "modulo step must not be 0"
            if abs(offset) >= abs(step):
                return "modulo offset must be smaller than its step"
        elif kind == "allowed_values":
            if not isinstance(args, list):
                return "allowed_values needs a list"
        elif kind == "allowed_pattern":
            if not isinstance(args, str):
                return "allowed_pattern needs a regular expression string"
            compile_pattern(args)
        elif kind == "custom_constraint":
            return custom_constraint_name_problem(args)
        else:
            return f"unknown constraint {kind!r}"
    except PatternError as exc:
        return f"allowed_pattern is not a valid regular expression: {exc}"
    except ValueError as exc:
        return f"{kind}: {exc}"
    return None


def _shown(value: Any, show_value: bool) -> str:
    return str(value) if show_value else "the value"


def _range_problem(number: Any, args: Mapping[str, Any], what: str) -> str | None:
    low, high = _number_arg(args, "min"), _number_arg(args, "max")
    if (low is not None and number < low) or (high is not None and number > high):
        return f"{what} is out of range (min: {low}, max: {high})"
    return None


def constraint_problem(
    value: Any,
    constraint: Constraint,
    *,
    show_value: bool = True,
    context: ConstraintContext = NO_CONTEXT,
) -> str | None:
    """Heat's message when ``value`` violates ``constraint``, else None.

    A ``custom_constraint`` that asks a cloud service (``nova.flavor`` …) passes: there is
    none here (``custom_constraints.py``).
    """
    kind, args = constraint.kind, constraint.value
    problem: str | None = None
    if kind == "length":
        if isinstance(value, str | list | tuple | Mapping):
            problem = _range_problem(len(value), args, f"length ({len(value)})")
    elif kind == "range":
        try:
            number = to_number(value)
        except ValueError:
            return None  # a type problem, reported by the type check
        problem = _range_problem(number, args, _shown(value, show_value))
    elif kind == "modulo":
        try:
            number = to_number(value)
        except ValueError:
            return None
        step, offset = to_number(args["step"]), to_number(args["offset"])
        if number % step != offset % step:
            problem = (
                f"{_shown(value, show_value)} is not a multiple of {step} "
                f"with an offset of {offset}"
            )
    elif kind == "allowed_values":
        items = value if isinstance(value, list | tuple) else [value]
        allowed = list(args)
        for item in items:
            if not any(_same(item, choice) for choice in allowed):
                problem = f'"{_shown(item, show_value)}" is not an allowed value {allowed}'
                break
    elif kind == "allowed_pattern":
        items = value if isinstance(value, list | tuple) else [value]
        for item in items:
            text = item if isinstance(item, str) else str(item)
            if not matches_whole(args, text):
                problem = f'"{_shown(item, show_value)}" does not match pattern "{args}"'
                break
    elif kind == "custom_constraint":
        problem = custom_constraint_problem(args, value, show_value=show_value, context=context)
    if problem is not None and constraint.description:
        return constraint.description
    return problem


def _same(value: Any, choice: Any) -> bool:
    if value == choice and type(value) is not bool and type(choice) is not bool:
        return True
    if isinstance(value, bool) or isinstance(choice, bool):
        return value is choice
    return str(value) == str(choice)


def check_constraints(
    value: Any,
    constraints: tuple[Constraint, ...],
    *,
    show_value: bool = True,
    context: ConstraintContext = NO_CONTEXT,
) -> str | None:
    """The message of the first constraint ``value`` violates, else None."""
    for constraint in constraints:
        problem = constraint_problem(value, constraint, show_value=show_value, context=context)
        if problem is not None:
            return problem
    return None


def _coerce_scalar(value: Any, kind: PropertyType) -> Any:
    if kind is PropertyType.STRING:
        return to_string(value)
    if kind is PropertyType.INTEGER:
        return to_integer(value)
    if kind is PropertyType.NUMBER:
        return to_number(value)
    if kind is PropertyType.BOOLEAN:
        return to_boolean(value)
    if kind is PropertyType.LIST:
        if not isinstance(value, list | tuple):
            raise ValueError(f"expected a list, got {type_word(value)}")
        return list(value)
    if kind is PropertyType.MAP:
        if not isinstance(value, Mapping):
            raise ValueError(f"expected a map, got {type_word(value)}")
        return dict(value)
    return value


def coerce_property(
    value: Any,
    schema: PropertySchema,
    *,
    is_deferred: Callable[[Any], bool] = _never_deferred,
    path: tuple[PathPart, ...] = (),
    conceals: Callable[[Any], bool] = _never_concealed,
) -> tuple[Any, list[Violation]]:
    """``value`` converted to the schema's type and checked against its constraints.

    Values for which ``is_deferred`` is true (function calls not evaluated yet) are left
    as they are; containers are checked around them. A value the schema declares hidden,
    or one ``conceals`` recognises (from a hidden parameter), is never quoted in a message.
    """
    if is_deferred(value):
        return value, []
    hidden = schema.hidden or conceals(value)
    try:
        coerced = _coerce_scalar(value, schema.type)
    except ValueError as exc:
        if hidden:
            return value, [Violation(path, f"expected {_EXPECTED[schema.type]}, got {SHOWN_AS}")]
        return value, [Violation(path, str(exc))]
    inside = _always_concealed if schema.hidden else conceals
    problems: list[Violation] = []
    if schema.type is PropertyType.LIST and schema.item_schema is not None:
        items = []
        for index, item in enumerate(coerced):
            item_value, item_problems = coerce_property(
                item,
                schema.item_schema,
                is_deferred=is_deferred,
                path=(*path, index),
                conceals=inside,
            )
            items.append(item_value)
            problems.extend(item_problems)
        coerced = items
    elif schema.type is PropertyType.MAP and schema.map_schema is not None:
        coerced, map_problems = validate_properties(
            coerced, schema.map_schema, is_deferred=is_deferred, path=path, conceals=inside
        )
        problems.extend(map_problems)
    if not problems and schema.constraints and not _contains_deferred(coerced, is_deferred):
        message = check_constraints(coerced, schema.constraints, show_value=not hidden)
        if message is not None:
            problems.append(Violation(path, message))
    return coerced, problems


def _contains_deferred(value: Any, is_deferred: Callable[[Any], bool]) -> bool:
    if is_deferred(value):
        return True
    if isinstance(value, Mapping):
        return any(_contains_deferred(item, is_deferred) for item in value.values())
    if isinstance(value, list | tuple):
        return any(_contains_deferred(item, is_deferred) for item in value)
    return False


def validate_properties(
    values: Mapping[Any, Any],
    schemas: Mapping[str, PropertySchema],
    *,
    is_deferred: Callable[[Any], bool] = _never_deferred,
    path: tuple[PathPart, ...] = (),
    open_properties: bool = False,
    conceals: Callable[[Any], bool] = _never_concealed,
) -> tuple[dict[str, Any], list[Violation]]:
    """Properties coerced to their schemas with defaults applied, and every problem found.

    Unknown names get a did-you-mean hint; a null value counts as not given (Heat's rule),
    so a required property set to null is missing.
    """
    result: dict[str, Any] = {}
    problems: list[Violation] = []
    for name, value in values.items():
        schema = schemas.get(name) if isinstance(name, str) else None
        if schema is None:
            if open_properties:
                result[name] = value
                continue
            close = difflib.get_close_matches(str(name), list(schemas), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            problems.append(Violation((*path, name), f"unknown property {name!r}{hint}"))
            continue
        if value is None:
            continue
        coerced, value_problems = coerce_property(
            value, schema, is_deferred=is_deferred, path=(*path, name), conceals=conceals
        )
        result[name] = coerced
        problems.extend(value_problems)
    for name, schema in schemas.items():
        if name in result:
            continue
        if schema.required:
            problems.append(Violation(path, f"missing required property {name!r}"))
        elif schema.default is not None:
            result[name] = schema.default
    return result, problems
