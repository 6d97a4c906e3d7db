"""A prepared stack: resource and output definitions, partially evaluated and validated."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from converge.core.graph import DependencyGraph
from converge.core.hidden import NOTHING_HIDDEN, HiddenValues
from converge.core.schema import ResourceTypeSchema, validate_properties
from converge.core.template.context import DataContext, ResourceData, StackScope
from converge.core.template.environment import Environment
from converge.core.template.nodes import (
    ALL_ATTRIBUTES,
    Function,
    Where,
    format_path,
    references,
    resolve,
)
from converge.core.template.versions import HotVersion
from converge.errors import TemplateError, TemplateErrors


def is_deferred(value: Any) -> bool:
    """A function call left for the engine to evaluate with resource data."""
    return isinstance(value, Function)


@dataclass(frozen=True)
class ResourceDefinition:
    """One enabled resource of a prepared stack."""

    name: str
    type: str  # as written in the template
    implementation_type: str  # after the environment's registry (or a template file name)
    properties: Any  # partially evaluated: may hold get_resource / get_attr nodes
    where: Where = field(repr=False, compare=False)
    depends_on: tuple[str, ...] = ()
    requires: frozenset[str] = frozenset()  # explicit and implicit
    metadata: Any = None
    deletion_policy: str = "Delete"
    deletion_policy_stated: bool = False  # written in the template, not the default
    hidden_values: HiddenValues = field(default=NOTHING_HIDDEN, repr=False, compare=False)
    update_policy: Any = None
    external_id: Any = None
    description: str = ""
    hooks: frozenset[str] = frozenset()
    restricted_actions: frozenset[str] = frozenset()
    provider_template: str | None = None  # the files-map key when the type is a template
    # A digest of that template's text: a changed file updates the nested stack even when
    # the resource's properties did not change (Heat compares the nested template).
    provider_digest: str | None = None
    schema: ResourceTypeSchema | None = field(default=None, repr=False, compare=False)
    scope: StackScope | None = field(default=None, repr=False, compare=False)

    def _context(self, data: ResourceData) -> DataContext:
        if self.scope is None:
            raise RuntimeError(f"resource {self.name!r} was not made by prepare_stack")
        return DataContext(self.scope, data)

    def resolve_properties(self, data: ResourceData) -> dict[str, Any]:
        """The final properties: evaluated with ``data``, defaulted and coerced by the schema."""
        values = resolve(self.properties, self._context(data))
        key = self.scope.key("properties") if self.scope is not None else "properties"
        if not isinstance(values, Mapping):
            raise self.where.child(key).error(f"{key} must be a map")
        if self.schema is None:
            return dict(values)
        coerced, problems = validate_properties(
            values,
            self.schema.properties,
            open_properties=self.schema.open_properties,
            conceals=self.hidden_values.conceals,
        )
        if problems:
            base = self.where.child(key)
            TemplateErrors.raise_if_any(
                base.child(*problem.path).error(problem.message) for problem in problems
            )
        return coerced

    def resolve_metadata(self, data: ResourceData) -> Any:
        return resolve(self.metadata, self._context(data))


@dataclass(frozen=True)
class OutputDefinition:
    """One enabled output."""

    name: str
    value: Any
    where: Where = field(repr=False, compare=False)
    description: str = ""
    scope: StackScope | None = field(default=None, repr=False, compare=False)

    def resolve(self, data: ResourceData) -> Any:
        if self.scope is None:
            raise RuntimeError(f"output {self.name!r} was not made by prepare_stack")
        return resolve(self.value, DataContext(self.scope, data))


@dataclass(frozen=True)
class StackDefinition:
    """What a stack operation converges to: the enabled resources and outputs, validated."""

    version: HotVersion
    description: str
    parameters: Mapping[str, Any]  # final values (hidden ones included: never print them)
    resources: Mapping[str, ResourceDefinition]  # enabled only, in template order
    outputs: Mapping[str, OutputDefinition]
    conditions: Mapping[str, bool] = field(default_factory=dict)
    hidden_parameters: frozenset[str] = frozenset()
    parameter_types: Mapping[str, str] = field(default_factory=dict)
    hidden_values: HiddenValues = field(default=NOTHING_HIDDEN, repr=False, compare=False)
    notes: tuple[str, ...] = ()  # things accepted without effect (event_sinks, …)
    environment: Environment | None = field(default=None, repr=False, compare=False)

    def hooks_for(self, name: str) -> frozenset[str]:
        """Breakpoints set for a resource name, also one the template no longer has."""
        resource = self.resources.get(name)
        if resource is not None:
            return resource.hooks
        return self.environment.hooks_for(name) if self.environment is not None else frozenset()

    def parameter_texts(self) -> dict[str, str]:
        """Parameter values as Heat shows them: text by type, hidden ones masked
        (Heat's ``Parameter.__str__``: ``'True'``, ``'3'``, ``'a,b'``, JSON for json)."""
        return {
            name: "******"
            if name in self.hidden_parameters
            else parameter_text(self.parameter_types.get(name, "string"), value)
            for name, value in self.parameters.items()
        }

    def graph(self) -> DependencyGraph[str]:
        """Resources and their requirements ("a requires b": b converges first)."""
        return DependencyGraph.from_requirements(
            {name: sorted(resource.requires) for name, resource in self.resources.items()}
        )

    def attributes_needed(self) -> Mapping[str, frozenset[str]]:
        """Per resource, the top-level attributes other resources or outputs ask for."""
        return self._attributes_needed

    @cached_property
    def _attributes_needed(self) -> Mapping[str, frozenset[str]]:
        # Computed once per prepared template: workers ask for it on every check.
        needed: dict[str, set[str]] = {}
        snippets: list[Any] = [
            snippet
            for resource in self.resources.values()
            for snippet in (resource.properties, resource.metadata)
        ]
        snippets.extend(output.value for output in self.outputs.values())
        for snippet in snippets:
            for reference in references(snippet):
                if reference.attribute is not None and reference.resource in self.resources:
                    needed.setdefault(reference.resource, set()).add(reference.attribute)
        return {name: frozenset(names) for name, names in needed.items()}

    def needs_all_attributes(self, name: str) -> bool:
        return ALL_ATTRIBUTES in self.attributes_needed().get(name, frozenset())


def parameter_text(type_name: str, value: Any) -> str:
    """One parameter value as Heat's ``Parameter.__str__`` writes it."""
    if value is None:
        return ""
    if type_name == "comma_delimited_list" and isinstance(value, list | tuple):
        return ",".join(str(item) for item in value)
    if type_name == "json":
        return json.dumps(value)
    return str(value)


def located(error: TemplateError, where: Where) -> TemplateError:
    """Fill in file/line/path from ``where`` where the error has none."""
    return error.located(file=where.file, line=where.line, path=format_path(where.path))
