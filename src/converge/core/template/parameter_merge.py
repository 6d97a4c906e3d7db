"""Heat's ``parameter_merge_strategies``: the environment files' values combined by type.

Heat applies them where the template's parameter types are known (heat/common/
environment_util.py), and so does ``prepare_stack``, through ``environment_sources``. The
files are taken in order, ``parameters`` and ``parameter_defaults`` each on their own:

* the first file that gives a parameter a value fixes its strategy: its own entry for the
  parameter, else its ``default`` entry, else ``overwrite``. A later file may repeat that
  strategy but not name another one (Heat's ConflictingMergeStrategyForParam);
* ``overwrite`` replaces the earlier value; ``merge`` concatenates strings, extends
  comma_delimited_lists and updates json maps (keys with a null value are skipped);
  ``deep_merge`` merges json maps at every level (lists there are extended, strings
  concatenated) and is ``merge`` for other types. Numbers and booleans cannot be merged
  (Heat's InvalidMergeStrategyForParam).

Names the template does not declare are left to the plain last-file-wins view (unknown
``parameters`` are reported there; ``parameter_defaults`` may be for nested stacks, which
merge them with their own template's types). The request's values (``-P``) stay above all
of this, as everywhere in converge.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from converge.core.schema import type_word
from converge.core.template.environment import Environment
from converge.core.template.nodes import Where
from converge.core.template.parameter_layers import (
    DEEP_MERGE,
    DEFAULT_STRATEGY_KEY,
    OVERWRITE,
    STRATEGIES_SECTION,
    ParameterLayer,
)
from converge.core.template.parameters import ParameterSchema, ParameterSource, ParameterType
from converge.errors import TemplateError

_SECTIONS = ("parameters", "parameter_defaults")
_MERGEABLE = (ParameterType.STRING, ParameterType.COMMA_DELIMITED_LIST, ParameterType.JSON)


def merge_values(kind: ParameterType, old: Any, new: Any, *, deep: bool = False) -> Any:
    """``new`` merged into ``old``, both already of ``kind``; ``ValueError`` if they cannot be."""
    if kind is ParameterType.STRING:
        return old + new
    if kind is ParameterType.COMMA_DELIMITED_LIST:
        return [*old, *new]
    if kind is not ParameterType.JSON:
        raise ValueError(f"a {kind} parameter can only be overwritten")
    if isinstance(old, dict) and isinstance(new, dict):
        if not old:
            return new
        if deep:
            return _deep_merge(old, new)
        return {**old, **{key: value for key, value in new.items() if value is not None}}
    if isinstance(old, list) and isinstance(new, list):
        return [*old, *new]
    raise ValueError(f"cannot merge {type_word(new)} into {type_word(old)}")


def _deep_merge(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(old)
    for key, value in new.items():
        if value is None:
            continue
        earlier = merged.get(key)
        if isinstance(value, dict) and isinstance(earlier, dict) and earlier:
            merged[key] = _deep_merge(earlier, value)
        elif isinstance(value, list) and isinstance(earlier, list):
            merged[key] = [*earlier, *value]
        elif isinstance(value, str) and isinstance(earlier, str):
            merged[key] = earlier + value
        else:  # new, or of another type than before: Heat would fail, taking it is kinder
            merged[key] = value
    return merged


@dataclass(frozen=True)
class _Strategy:
    name: str
    where: Where | None  # the entry that chose it; None: no file named one (overwrite)
    file: str  # the file that first gave the parameter a value


class _Merge:
    """The files' values folded in order, with every problem found."""

    def __init__(self, schemas: Mapping[str, ParameterSchema]) -> None:
        self.schemas = schemas
        self.strategies: dict[str, _Strategy] = {}
        self.values: dict[str, dict[str, Any]] = {section: {} for section in _SECTIONS}
        self.files: dict[str, dict[str, list[str]]] = {section: {} for section in _SECTIONS}
        self.failed: set[tuple[str, str]] = set()
        self.conflicts: set[tuple[int, str]] = set()
        self.errors: list[TemplateError] = []

    def layer(self, index: int, layer: ParameterLayer) -> None:
        for section in _SECTIONS:
            for name, value in getattr(layer, section).items():
                schema = self.schemas.get(name)
                if schema is not None:
                    strategy = self.strategy(index, layer, name)
                    self.value(section, schema, strategy, layer.label, value)

    def strategy(self, index: int, layer: ParameterLayer, name: str) -> _Strategy:
        earlier = self.strategies.get(name)
        named = layer.strategies.get(name)
        if named is not None:
            where = layer.where.child(STRATEGIES_SECTION, name)
            if earlier is None:
                self.strategies[name] = _Strategy(named, where, layer.label)
            elif named != earlier.name and (index, name) not in self.conflicts:
                self.conflicts.add((index, name))
                how = "" if earlier.where else " (the default)"
                self.errors.append(
                    where.error(
                        f"conflicting merge strategy {named!r} for parameter {name!r}: it is "
                        f"{earlier.name!r}{how} since {earlier.file} gave it a value (a "
                        "parameter keeps the strategy of the first file that sets it)"
                    )
                )
        elif earlier is None:
            default = layer.strategies.get(DEFAULT_STRATEGY_KEY)
            entry = layer.where.child(STRATEGIES_SECTION, DEFAULT_STRATEGY_KEY) if default else None
            self.strategies[name] = _Strategy(default or OVERWRITE, entry, layer.label)
        return self.strategies[name]

    def value(
        self, section: str, schema: ParameterSchema, strategy: _Strategy, file: str, value: Any
    ) -> None:
        name, values, files = schema.name, self.values[section], self.files[section]
        if name not in values or strategy.name == OVERWRITE:
            values[name], files[name] = value, [file]
            return
        if value is None or (section, name) in self.failed:
            return
        merged = self.merged(section, schema, strategy, values[name], file, value)
        if merged is None:
            self.failed.add((section, name))
        else:
            values[name], files[name] = merged, [*files[name], file]

    def merged(
        self,
        section: str,
        schema: ParameterSchema,
        strategy: _Strategy,
        old: Any,
        file: str,
        new: Any,
    ) -> Any:
        if schema.type not in _MERGEABLE:
            assert strategy.where is not None  # only overwrite comes from no entry
            self.errors.append(
                strategy.where.error(
                    f"invalid merge strategy {strategy.name!r} for parameter {schema.name!r}: "
                    f"a {schema.type} parameter can only be overwritten"
                )
            )
            return None
        sides = []
        for value, origin in ((old, self.label(section, schema.name)), (new, f"from {file}")):
            try:
                sides.append(schema.coerce_type(value))
            except ValueError as exc:
                message = f"invalid value {origin} for parameter {schema.name!r}: {exc}"
                self.errors.append(schema.where.error(message))
                return None
        try:
            return merge_values(schema.type, *sides, deep=strategy.name == DEEP_MERGE)
        except ValueError as exc:
            origin = self.label(section, schema.name, also=file)
            message = f"invalid value {origin} for parameter {schema.name!r}: {exc}"
            self.errors.append(schema.where.error(message))
            return None

    def label(self, section: str, name: str, also: str | None = None) -> str:
        """Where a value came from, for messages: ``from a.yaml``, ``merged from a, b``."""
        files = [*self.files[section][name], *([also] if also else [])]
        source = f"from {files[0]}" if len(files) == 1 else "merged from " + ", ".join(files)
        return source if section == "parameters" else f"{source} (parameter_defaults)"

    def labels(self, section: str) -> dict[str, str]:
        return {name: self.label(section, name) for name in self.files[section]}


def environment_sources(
    environment: Environment, schemas: Mapping[str, ParameterSchema]
) -> tuple[list[ParameterSource], list[TemplateError]]:
    """The environment's ``parameters`` and ``parameter_defaults`` as ``resolve_parameters``
    sources (in that order), merged by the files' strategies, and the problems doing it."""
    origin = f"from {environment.filename}" if environment.filename else "from the environment"
    parameters: Mapping[str, Any] = environment.parameters
    defaults: Mapping[str, Any] = environment.parameter_defaults
    labels: dict[str, str] = {}
    default_labels: dict[str, str] = {}
    errors: list[TemplateError] = []
    if environment.has_merge_strategies:
        merge = _Merge(schemas)
        for index, layer in enumerate(environment.parameter_layers):
            merge.layer(index, layer)
        parameters = {**parameters, **merge.values["parameters"]}
        defaults = {**defaults, **merge.values["parameter_defaults"]}
        labels, default_labels = merge.labels("parameters"), merge.labels("parameter_defaults")
        errors = merge.errors
    return [
        ParameterSource(parameters, origin, environment.origins, labels=labels),
        ParameterSource(
            defaults, "from parameter_defaults", reject_unknown=False, labels=default_labels
        ),
    ], errors
