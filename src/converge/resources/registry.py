"""The resource types a deployment knows: type name -> one stateless plugin instance."""

from __future__ import annotations

import dataclasses
import difflib

from converge.core.schema import ResourceTypeSchema
from converge.core.template.environment import is_provider_template
from converge.errors import NotFound
from converge.resources.base import ResourcePlugin
from converge.resources.builtin import BUILTIN_TYPES
from converge.resources.group import GROUP_TYPES
from converge.resources.local import LOCAL_TYPES
from converge.resources.nested import ProviderTemplate
from converge.resources.postgres import POSTGRES_TYPES


class PluginRegistry:
    """Plugins by resource type name; also the ``TypeSchemas`` template validation uses.

    A type that names a template file (a provider template) is served by the nested-stack
    plugin; its schema comes from the template itself, so ``lookup`` knows none.
    """

    def __init__(self) -> None:
        self._plugins: dict[str, ResourcePlugin] = {}
        self._schemas: dict[str, ResourceTypeSchema] = {}
        self._provider = ProviderTemplate()

    def register(self, plugin_class: type[ResourcePlugin], *, type_name: str | None = None) -> None:
        """Add a type under its own ``type_name`` or the name given (an alias).

        Plugins are stateless, so one instance serves every resource of the type.
        """
        name = type_name or plugin_class.type_name
        existing = self._plugins.get(name)
        if existing is not None and type(existing) is not plugin_class:
            raise ValueError(
                f"resource type {name!r} is already registered to {type(existing).__name__}"
            )
        schema = plugin_class.schema()
        if schema.type_name != name:
            schema = dataclasses.replace(schema, type_name=name)
        self._plugins[name] = plugin_class()
        self._schemas[name] = schema

    def plugin(self, type_name: str) -> ResourcePlugin:
        """The plugin for ``type_name``; ``NotFound`` naming the closest known types."""
        try:
            return self._plugins[type_name]
        except KeyError:
            if is_provider_template(type_name):
                return self._provider
            raise NotFound(self.unknown_type_message(type_name)) from None

    def unknown_type_message(self, type_name: str) -> str:
        message = f"unknown resource type {type_name!r}"
        close = difflib.get_close_matches(type_name, self._plugins, n=3)
        if close:
            return message + " (did you mean " + " or ".join(map(repr, close)) + "?)"
        return message + f"; known types: {', '.join(self.type_names())}"

    def lookup(self, type_name: str) -> ResourceTypeSchema | None:
        return self._schemas.get(type_name)

    def type_names(self) -> list[str]:
        return sorted(self._plugins)

    def __contains__(self, type_name: object) -> bool:
        return type_name in self._plugins or (
            isinstance(type_name, str) and is_provider_template(type_name)
        )


def default_registry(*, enable_local_types: bool = True) -> PluginRegistry:
    """A new registry holding every built-in type (fresh each call: nothing shared).

    ``enable_local_types`` off leaves out the ``Local::*`` types (files, directories,
    processes on the engine's machine): a server taking templates from the network enables
    them only when its configuration says so.
    """
    registry = PluginRegistry()
    for name, plugin_class in BUILTIN_TYPES:
        registry.register(plugin_class, type_name=name)
    for group_class in GROUP_TYPES:
        registry.register(group_class)
    if enable_local_types:
        for plugin_class in LOCAL_TYPES:
            registry.register(plugin_class)
    for plugin_class in POSTGRES_TYPES:
        registry.register(plugin_class)
    return registry
