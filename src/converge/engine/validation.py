"""Preparing a stack for the engine: the template layer's checks, then each plugin's own,
then those of the nested stacks its provider templates will make.

Everything here runs before anything is touched, so a mistyped property in a provider
template is reported with its file and line instead of failing half-way through a create.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from converge.core.template import (
    Environment,
    ResourceDefinition,
    StackDefinition,
    StackIdentity,
    Template,
    load_template,
    prepare_stack,
    template_from_data,
)
from converge.core.template.nested import MAX_NESTING_DEPTH, child_environment
from converge.core.template.nodes import is_static
from converge.engine.settings import EngineSettings
from converge.errors import TemplateError, TemplateErrors
from converge.resources.base import ValidationContext
from converge.resources.registry import PluginRegistry


def prepare_definition(
    template: Template,
    *,
    environment: Environment,
    parameters: Mapping[str, Any],
    files: Mapping[str, str],
    identity: StackIdentity,
    registry: PluginRegistry,
    settings: EngineSettings | None,
    previous_parameters: Mapping[str, Any] | None = None,
    depth: int = 0,
    now: datetime | None = None,
    require_values: bool = True,
) -> StackDefinition:
    """A validated definition, or ``TemplateError`` naming every problem found.

    ``require_values`` False: ``converge validate``, which as Heat's needs no parameter
    values (``prepare_stack``); a stack operation always needs them.

    ``settings`` None: the template checks only, not the plugins' own (which need to know
    the engine's configuration: allowed roots, plugin settings). ``now``: the time an
    ``expiration`` constraint is compared with, when a request is being accepted (never
    when a stored stack is prepared again: time passing must not break it).
    """
    definition = prepare_stack(
        template,
        environment=environment,
        parameters=parameters,
        files=files,
        identity=identity,
        schemas=registry,
        previous_parameters=previous_parameters,
        now=now,
        require_values=require_values,
    )
    problems = missing_packages(definition, registry)
    if settings is not None:
        problems += plugin_problems(definition, registry, settings)
    problems += nested_problems(definition, files, identity, registry, settings, depth, now)
    TemplateErrors.raise_if_any(problems)
    return definition


def missing_packages(definition: StackDefinition, registry: PluginRegistry) -> list[TemplateError]:
    """Types whose optional packages are not installed (``converge[postgres]`` …)."""
    problems: list[TemplateError] = []
    for resource in definition.resources.values():
        if resource.provider_template is not None:
            continue
        missing = registry.plugin(resource.implementation_type).missing_package()
        if missing is not None:
            problems.append(resource.where.child("type").error(missing))
    return problems


def plugin_problems(
    definition: StackDefinition, registry: PluginRegistry, settings: EngineSettings
) -> list[TemplateError]:
    """Ask each resource's plugin about the values known now (paths, commands …)."""
    context = ValidationContext(
        allowed_roots=settings.allowed_roots, settings=settings.plugin_settings
    )
    problems: list[TemplateError] = []
    for resource in definition.resources.values():
        if resource.provider_template is not None:
            continue  # a nested stack: its template is checked by ``nested_problems``
        plugin = registry.plugin(resource.implementation_type)
        known = _known_properties(resource.properties)
        unknown = frozenset(resource.properties or ()) - known.keys()
        for name, message in plugin.validate(known, replace(context, unknown=unknown)):
            # A plugin's message may quote a value from a hidden parameter.
            shown = definition.hidden_values.scrub(message)
            problems.append(resource.where.child("properties", name).error(shown))
    return problems


def nested_problems(
    definition: StackDefinition,
    files: Mapping[str, str],
    identity: StackIdentity,
    registry: PluginRegistry,
    settings: EngineSettings | None,
    depth: int = 0,
    now: datetime | None = None,
) -> list[TemplateError]:
    """Prepare the stack each provider template resource will make, where its parameters
    are known now; one whose properties wait for other resources is checked when made."""
    problems: list[TemplateError] = []
    for resource in definition.resources.values():
        provider = resource.provider_template
        if provider is None:
            problems += _generated_nested_problems(
                definition, resource, files, identity, registry, settings, depth, now
            )
            continue
        if provider not in files:
            continue  # reported missing by the template layer
        properties = resource.properties or {}
        known = _known_properties(properties)
        if len(known) != len(properties):
            continue
        if depth + 1 > MAX_NESTING_DEPTH:
            problems.append(
                resource.where.child("type").error(
                    f"provider templates nest deeper than {MAX_NESTING_DEPTH} levels "
                    f"(does {provider!r} use itself?)"
                )
            )
            continue
        try:
            assert definition.environment is not None  # set by prepare_stack
            prepare_definition(
                load_template(files[provider], provider),
                environment=child_environment(
                    definition.environment, resource.name, resource.type, provider
                ),
                parameters=known,
                files=files,
                identity=StackIdentity(
                    f"{identity.stack_name}-{resource.name}", "", identity.project_id
                ),
                registry=registry,
                settings=settings,
                depth=depth + 1,
                now=now,
            )
        except TemplateError as exc:
            problems.extend(exc.errors if isinstance(exc, TemplateErrors) else [exc])
    return problems


def _generated_nested_problems(
    definition: StackDefinition,
    resource: ResourceDefinition,
    files: Mapping[str, str],
    identity: StackIdentity,
    registry: PluginRegistry,
    settings: EngineSettings | None,
    depth: int,
    now: datetime | None,
) -> list[TemplateError]:
    """Problems of the nested stack a plugin writes itself (a group's members), checked as
    Heat checks a group: by a template of one member, where its properties are known."""
    if resource.implementation_type not in registry:
        return []
    plugin = registry.plugin(resource.implementation_type)
    template = plugin.validation_template(_known_properties(resource.properties))
    if template is None:
        return []
    where = resource.where.child("properties")
    try:
        assert definition.environment is not None  # set by prepare_stack
        prepare_definition(
            template_from_data(template, f"{resource.name} ({resource.type})"),
            environment=child_environment(definition.environment, resource.name, resource.type, ""),
            parameters={},
            files=files,
            identity=StackIdentity(
                f"{identity.stack_name}-{resource.name}", "", identity.project_id
            ),
            registry=registry,
            settings=settings,
            depth=depth + 1,
            now=now,
        )
    except TemplateError as exc:
        found = exc.errors if isinstance(exc, TemplateErrors) else [exc]
        return [where.error(f"a member would be invalid: {error}") for error in found]
    return []


def _known_properties(properties: Any) -> dict[str, Any]:
    if not isinstance(properties, Mapping):
        return {}
    return {key: value for key, value in properties.items() if is_static(value)}
