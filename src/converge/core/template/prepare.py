"""``prepare_stack``: a loaded template, an environment and values -> a validated stack.

One pass that collects every problem it can find (``TemplateErrors``) instead of stopping
at the first: parameters, conditions (evaluated once), each resource's keys, type, properties
and references, outputs, and finally dependency cycles.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any

from converge.core.custom_constraints import ConstraintContext, unchecked_note
from converge.core.hidden import NOTHING_HIDDEN, HiddenValues
from converge.core.schema import (
    AttributeSchema,
    PropertySchema,
    PropertyType,
    ResourceTypeSchema,
    TypeSchemas,
    to_boolean,
    validate_properties,
)
from converge.core.template.context import StackIdentity, StackScope
from converge.core.template.definitions import (
    OutputDefinition,
    ResourceDefinition,
    StackDefinition,
    is_deferred,
)
from converge.core.template.environment import Environment, is_provider_template
from converge.core.template.gcpause import without_gc
from converge.core.template.nodes import Unresolved, Where, format_path, parse, partial
from converge.core.template.nodes import references as find_references
from converge.core.template.parameter_merge import environment_sources
from converge.core.template.parameters import (
    ParameterSchema,
    ParameterSource,
    ParameterType,
    parameter_schemas,
    resolve_parameters,
)
from converge.core.template.template import Template, did_you_mean, load_template
from converge.core.template.versions import normalize_deletion_policy
from converge.errors import TemplateError, TemplateErrors

# Every resource has these, whatever its type (Heat's base attributes).
BASE_ATTRIBUTES = ("show",)
_PROVIDER_ATTRIBUTES = ("OS::stack_id",)
_PARAMETER_PROPERTY_TYPES = {
    ParameterType.STRING: PropertyType.STRING,
    ParameterType.NUMBER: PropertyType.NUMBER,
    ParameterType.COMMA_DELIMITED_LIST: PropertyType.LIST,
    ParameterType.JSON: PropertyType.ANY,
    ParameterType.BOOLEAN: PropertyType.BOOLEAN,
}
_EMPTY: Mapping[str, Any] = MappingProxyType({})


def provider_schema(template: Template, type_name: str) -> ResourceTypeSchema:
    """A provider template as a resource type: parameters are properties, outputs attributes."""
    schemas, errors = parameter_schemas(template)
    TemplateErrors.raise_if_any(errors)
    properties = {
        name: PropertySchema(
            type=_PARAMETER_PROPERTY_TYPES[schema.type],
            description=schema.description,
            required=not schema.has_default,
            default=schema.default if schema.has_default else None,
            constraints=schema.constraints,
            update_allowed=True,
            hidden=schema.hidden,
        )
        for name, schema in schemas.items()
    }
    attributes = {name: AttributeSchema(description=str(name)) for name in template.outputs}
    attributes.update({name: AttributeSchema() for name in _PROVIDER_ATTRIBUTES})
    return ResourceTypeSchema(type_name, properties, attributes, template.description)


class _Conditions:
    """Named conditions, each evaluated once on first use; cycles are reported."""

    def __init__(self, template: Template) -> None:
        self.template = template
        self.raw = template.conditions
        self.values: dict[str, bool] = {}
        self.evaluating: list[str] = []
        self.failed: set[str] = set()  # reported once; later uses count as unknown
        self.scope: StackScope | None = None  # set once the scope exists

    def __call__(self, name: str, where: Where) -> bool:
        if name in self.values:
            return self.values[name]
        if name in self.failed:
            raise Unresolved(name)
        if name not in self.raw:
            raise where.error(f"unknown condition {name!r}{did_you_mean(name, self.raw)}")
        if name in self.evaluating:
            cycle = [*self.evaluating[self.evaluating.index(name) :], name]
            raise where.error("condition cycle: " + " -> ".join(cycle))
        self.evaluating.append(name)
        try:
            at = self.template.section_where("conditions").child(name)
            value = self.evaluate(self.raw[name], at)
        except (TemplateError, Unresolved):
            self.failed.add(name)
            raise
        finally:
            self.evaluating.pop()
        self.values[name] = value
        return value

    def evaluate(self, raw: Any, where: Where) -> bool:
        """A condition definition or a resource's ``condition:`` value, as a boolean."""
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str):
            return self(raw, where)
        node = parse(raw, self.template.version.condition_functions, where)
        if not is_deferred(node):
            raise where.error(
                "a condition must be a boolean, a condition name or a condition function "
                f"({', '.join(sorted(self.template.version.condition_functions))})"
            )
        assert self.scope is not None  # set by prepare_stack before any evaluation
        value = node.resolve(self.scope)
        if isinstance(value, str):
            return self(value, where)
        try:
            return to_boolean(value)
        except ValueError:
            raise where.error(f"a condition must evaluate to a boolean, not {value!r}") from None


class _Preparer:
    def __init__(
        self,
        template: Template,
        environment: Environment,
        parameters: Mapping[str, Any],
        files: Mapping[str, str],
        identity: StackIdentity,
        schemas: TypeSchemas,
        previous_parameters: Mapping[str, Any] | None,
        now: datetime | None,
        require_values: bool,
    ) -> None:
        self.template = template
        self.version = template.version
        self.environment = environment
        self.given = parameters
        self.files = files
        self.identity = identity
        self.schemas = schemas
        self.previous = previous_parameters
        self.require_values = require_values
        self.errors: list[TemplateError] = []
        self.conditions = _Conditions(template)
        self.resource_types: dict[str, tuple[str, ResourceTypeSchema | None, str | None]] = {}
        self.provider_schemas: dict[str, ResourceTypeSchema | None] = {}
        self.constraint_context = ConstraintContext(now, self.type_exists)
        self.notes: list[str] = [*(w.format() for w in template.warnings), *environment.notes]
        self.hidden_values = NOTHING_HIDDEN

    # --- parameters and conditions ---------------------------------------------------------

    def parameters(self) -> tuple[dict[str, Any], Mapping[str, Any]]:
        schemas, errors = parameter_schemas(self.template)
        self.errors.extend(errors)
        from_environment, errors = environment_sources(self.environment, schemas)
        self.errors.extend(errors)
        sources = [ParameterSource(self.given), *from_environment]
        values, errors, warnings = resolve_parameters(
            schemas,
            sources,
            previous=self.previous,
            context=self.constraint_context,
            require_values=self.require_values,
        )
        self.errors.extend(errors)
        self.notes.extend(warning.format() for warning in warnings)
        self.notes.extend(
            f"parameter {name!r} has no value: plan and apply will need one"
            for name, schema in schemas.items()
            if not schema.has_default
            and not any(name in s.values for s in sources)
            and not self.require_values
        )
        self.hidden = frozenset(name for name, schema in schemas.items() if schema.hidden)
        self.hidden_values = HiddenValues.of(values[name] for name in self.hidden if name in values)
        self.note_unchecked_constraints(schemas)
        return values, schemas

    def note_unchecked_constraints(self, schemas: Mapping[str, ParameterSchema]) -> None:
        """Say which custom constraints could not be checked here (OpenStack look-ups)."""
        for name, schema in schemas.items():
            for constraint in schema.constraints:
                if constraint.kind != "custom_constraint":
                    continue
                note = unchecked_note(
                    constraint.value, f"parameter {name!r}", self.constraint_context
                )
                if note is not None:
                    self.notes.append(note)

    def condition_of(self, raw: Mapping[str, Any], where: Where) -> bool:
        """Whether a resource or output is enabled; problems count as enabled."""
        key = self.version.key("condition")
        if key not in raw or not self.version.supports_conditions:
            return True  # an unknown key where conditions do not exist: reported as such
        try:
            return self.conditions.evaluate(raw[key], where.child(key))
        except Unresolved:
            return True  # depends on a parameter that has no valid value: reported already
        except TemplateError as exc:
            self.errors.append(exc)
            return True

    # --- resource types --------------------------------------------------------------------

    def type_exists(self, type_name: str) -> bool:
        """Whether a resource of ``type_name`` could be made (``heat.resource_type``)."""
        try:
            implementation = self.environment.implementation_type(type_name)
        except ValueError:
            return False
        if is_provider_template(implementation):
            return implementation in self.files
        return self.schemas.lookup(implementation) is not None

    def provider(self, file: str, where: Where) -> ResourceTypeSchema | None:
        if file in self.provider_schemas:
            return self.provider_schemas[file]
        schema = None
        if file not in self.files:
            self.errors.append(where.error(f"provider template {file!r} is not in the files map"))
        else:
            try:
                nested = load_template(self.files[file], file, limits=self.template.limits)
                schema = provider_schema(nested, file)
            except TemplateError as exc:
                self.errors.append(exc)
        self.provider_schemas[file] = schema
        return schema

    def type_of(self, name: str, raw: Mapping[str, Any], where: Where) -> None:
        """Resolve a resource's type through the registry and find its schema."""
        key = self.version.key("type")
        type_name = raw.get(key)
        if not isinstance(type_name, str) or not type_name:
            self.errors.append(
                where.error(f"missing {key}")
                if type_name is None
                else where.child(key).error(f"{key} must be a string")
            )
            self.resource_types[name] = ("", None, None)
            return
        try:
            implementation = self.environment.implementation_type(type_name, name)
        except ValueError as exc:
            self.errors.append(where.child(key).error(str(exc)))
            self.resource_types[name] = (type_name, None, None)
            return
        if is_provider_template(implementation):
            schema = self.provider(implementation, where.child(key))
            self.resource_types[name] = (implementation, schema, implementation)
            return
        schema = self.schemas.lookup(implementation)
        if schema is None:
            known = [*self.schemas.type_names(), *self.environment.types]
            mapped = (
                ""
                if implementation == type_name
                else f" (mapped from {type_name!r} by the environment)"
            )
            self.errors.append(
                where.child(key).error(
                    f"unknown resource type {implementation!r}{mapped}"
                    f"{did_you_mean(implementation, known)}"
                )
            )
        self.resource_types[name] = (implementation, schema, None)

    def check_attribute(self, resource: str, attribute: str, where: Where) -> None:
        implementation, schema, provider = self.resource_types.get(resource, ("", None, None))
        if schema is None or schema.open_attributes:
            return
        if schema.open_properties and not schema.attributes:
            return
        if attribute in schema.attributes or attribute in BASE_ATTRIBUTES:
            return
        choices = [*schema.attributes, *BASE_ATTRIBUTES]
        message = (
            f"resource {resource!r} ({implementation}) has no attribute {attribute!r}"
            f"{did_you_mean(attribute, choices)}"
        )
        if provider is not None:
            # Heat accepts any attribute of a template resource (its value is null when
            # the template has no such output): a warning, not an error.
            note = f"{format_path(where.path)}: {message}; its value will be null"
            if note not in self.notes:
                self.notes.append(note)
            return
        raise where.error(message)

    # --- snippets ---------------------------------------------------------------------------

    def evaluate(self, raw: Any, where: Where, scope: StackScope) -> Any:
        """Parse a snippet and evaluate what does not need resource data."""
        try:
            return partial(parse(raw, self.version.functions, where), scope)
        except TemplateError as exc:
            self.errors.append(exc)
            return None

    def evaluate_key(
        self, raw: Mapping[str, Any], key: str, where: Where, scope: StackScope
    ) -> Any:
        """``evaluate`` of ``raw[key]``; None when it is absent or null.

        The child ``Where`` is made only for a value that is there: a resource has ten
        possible keys and usually two or three of them.
        """
        value = raw.get(key)
        if value is None:
            return None
        return self.evaluate(value, where.child(key), scope)

    def resource(self, name: str, raw: Any, where: Where, scope: StackScope) -> ResourceDefinition:
        version = self.version
        for written in raw:
            if written not in version.resource_keys:
                self.errors.append(
                    where.child(written).error(
                        f"unknown key {written!r}{did_you_mean(written, version.resource_keys)}"
                    )
                )
        implementation, schema, provider = self.resource_types[name]
        properties = self.properties(raw, where, scope, schema)
        key = version.key
        metadata = self.evaluate_key(raw, key("metadata"), where, scope)
        if metadata is not None and not isinstance(metadata, dict) and not is_deferred(metadata):
            at = where.child(key("metadata"))
            self.errors.append(at.error(f"{key('metadata')} must be a map"))
        update_policy = self.evaluate_key(raw, key("update_policy"), where, scope)
        external_id = self.evaluate_key(raw, key("external_id"), where, scope)
        deletion_policy = "Delete"
        if raw.get(key("deletion_policy")) is not None:
            at = where.child(key("deletion_policy"))
            value = self.evaluate(raw[key("deletion_policy")], at, scope)
            try:
                deletion_policy = normalize_deletion_policy(value, version, at)
            except TemplateError as exc:
                self.errors.append(exc)
        description = raw.get(key("description")) or ""
        if not isinstance(description, str):
            at = where.child(key("description"))
            self.errors.append(at.error(f"{key('description')} must be a string"))
            description = ""
        depends_on = self.depends_on(raw.get(key("depends_on")), where, scope)
        requires = set(depends_on)
        for snippet in (properties, metadata):
            for reference in find_references(snippet):
                if (
                    reference.resource in scope.resources
                    and reference.resource not in scope.disabled
                ):
                    requires.add(reference.resource)
        return ResourceDefinition(
            name=name,
            type=str(raw.get(key("type"))),
            implementation_type=implementation,
            properties=properties,
            where=where,
            depends_on=depends_on,
            requires=frozenset(requires),
            metadata=metadata,
            deletion_policy=deletion_policy,
            deletion_policy_stated=raw.get("deletion_policy") is not None,
            hidden_values=self.hidden_values,
            update_policy=update_policy,
            external_id=external_id,
            description=description,
            hooks=self.environment.hooks_for(name),
            restricted_actions=self.environment.restricted_actions_for(name),
            provider_template=provider,
            provider_digest=(
                hashlib.sha256(self.files[provider].encode()).hexdigest()[:16]
                if provider is not None and provider in self.files
                else None
            ),
            schema=schema,
            scope=scope,
        )

    def properties(
        self,
        raw: Mapping[str, Any],
        where: Where,
        scope: StackScope,
        schema: ResourceTypeSchema | None,
    ) -> Any:
        """A resource's properties, evaluated and checked against its type's schema."""
        key = self.version.key("properties")
        at = where.child(key)
        count = len(self.errors)
        properties = self.evaluate(raw.get(key) or {}, at, scope)
        if len(self.errors) > count:
            return {}  # reported; checking the rest against the schema would only add noise
        if not isinstance(properties, dict) and not is_deferred(properties):
            self.errors.append(at.error(f"{key} must be a map"))
            return {}
        if schema is not None and isinstance(properties, dict):
            _, problems = validate_properties(
                properties,
                schema.properties,
                is_deferred=is_deferred,
                open_properties=schema.open_properties,
                conceals=self.hidden_values.conceals,
            )
            self.errors.extend(at.child(*p.path).error(p.message) for p in problems)
        return properties

    def depends_on(self, raw: Any, resource: Where, scope: StackScope) -> tuple[str, ...]:
        if raw is None:
            return ()
        names = [raw] if isinstance(raw, str) else raw
        if not isinstance(names, list):
            key = self.version.key("depends_on")
            where = resource.child(key)
            self.errors.append(where.error(f"{key} must be a resource name or a list of them"))
            return ()
        result: list[str] = []
        for index, item in enumerate(names):
            if isinstance(item, str) and item in scope.resources:
                # Heat drops dependencies on resources whose condition is false
                if item not in scope.disabled and item not in result:
                    result.append(item)
                continue
            # the place is made for a problem only: most resources have none
            key = self.version.key("depends_on")
            at = resource.child(key, *((index,) if isinstance(raw, list) else ()))
            if not isinstance(item, str):
                message = f"{key} entries must be resource names, not {item!r}"
            else:
                message = f"{key}: unknown resource {item!r}{did_you_mean(item, scope.resources)}"
            self.errors.append(at.error(message))
        return tuple(result)

    def output(self, name: str, raw: Any, where: Where, scope: StackScope) -> OutputDefinition:
        for written in raw:
            if written not in self.version.output_keys:
                self.errors.append(
                    where.child(written).error(
                        f"unknown key {written!r}{did_you_mean(written, self.version.output_keys)}"
                    )
                )
        key = self.version.key
        value = self.evaluate(raw.get(key("value")), where.child(key("value")), scope)
        description = raw.get(key("description")) or ""
        return OutputDefinition(name, value, where, str(description), scope)

    # --- the whole stack --------------------------------------------------------------------

    def run(self) -> StackDefinition:
        template = self.template
        values, declared = self.parameters()
        section = template.section_where("resources")
        raw_resources = template.resources
        scope = StackScope(
            version=self.version,
            parameters=values,
            declared=declared,
            identity=self.identity,
            files=self.files,
            conditions=self.conditions,
            resources=raw_resources,
            check_attribute=self.check_attribute,
            mappings=template.mappings,
        )
        self.conditions.scope = scope
        for name in template.conditions:
            try:
                self.conditions(name, template.section_where("conditions").child(name))
            except Unresolved:
                pass
            except TemplateError as exc:
                self.errors.append(exc)

        disabled: set[str] = set()
        enabled: list[tuple[str, Where]] = []
        for name, raw in raw_resources.items():
            where = section.child(name)
            if not isinstance(raw, dict):
                self.errors.append(where.error("a resource must be a map with at least a type"))
                disabled.add(name)
                continue
            if self.condition_of(raw, where):
                enabled.append((name, where))
                self.type_of(name, raw, where)
            else:
                disabled.add(name)
        scope.disabled = frozenset(disabled)

        resources: dict[str, ResourceDefinition] = {}
        for name, where in enabled:
            resources[name] = self.resource(name, raw_resources[name], where, scope)

        outputs: dict[str, OutputDefinition] = {}
        output_section = template.section_where("outputs")
        for name, raw in template.outputs.items():
            where = output_section.child(name)
            if not isinstance(raw, dict):
                self.errors.append(where.error("an output must be a map with a value"))
                continue
            if self.condition_of(raw, where):
                outputs[name] = self.output(name, raw, where, scope)
            else:
                # Heat still lists an output whose condition is false, with a null value.
                description = str(raw.get(self.version.key("description")) or "")
                outputs[name] = OutputDefinition(name, None, where, description, scope)

        definition = StackDefinition(
            version=self.version,
            description=template.description,
            parameters=MappingProxyType(values),
            resources=MappingProxyType(resources),
            outputs=MappingProxyType(outputs),
            conditions=MappingProxyType(dict(self.conditions.values)),
            hidden_parameters=self.hidden,
            parameter_types={name: str(schema.type) for name, schema in declared.items()},
            hidden_values=self.hidden_values,
            notes=tuple(self.notes),
            environment=self.environment,
        )
        cycle = definition.graph().find_cycle()
        if cycle:
            path = " -> ".join([*cycle, cycle[0]])
            self.errors.append(resources[cycle[0]].where.error(f"dependency cycle: {path}"))
        TemplateErrors.raise_if_any(self.errors)
        return definition


@without_gc
def prepare_stack(
    template: Template,
    *,
    environment: Environment | None = None,
    parameters: Mapping[str, Any] = _EMPTY,
    files: Mapping[str, str] = _EMPTY,
    identity: StackIdentity,
    schemas: TypeSchemas,
    previous_parameters: Mapping[str, Any] | None = None,
    now: datetime | None = None,
    require_values: bool = True,
) -> StackDefinition:
    """Validate a template with its environment and values into a ``StackDefinition``.

    Every problem found is raised together as ``TemplateErrors`` (a single one as
    ``TemplateError``), each naming the file, line and path. ``now`` (aware) is the time
    an ``expiration`` constraint must lie after; without it only its form is checked, so
    preparing a stored stack again never fails because time has passed.
    ``require_values`` False checks a template as Heat's validate does: parameters without
    a value are noted (``notes``), and what depends on them is checked as far as it can be.
    """
    preparer = _Preparer(
        template,
        environment or Environment(),
        parameters,
        files,
        identity,
        schemas,
        previous_parameters,
        now,
        require_values,
    )
    return preparer.run()
