"""The resource types a deployment knows: type name -> one stateless plugin instance.

The shipped types are registered by name and their modules imported on first use: a
``converge validate`` of a template of test types loads neither the process launcher nor
the PostgreSQL types (start time matters there, see ``cli/validate.py``).
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Callable

from converge.core.schema import ResourceTypeSchema
from converge.core.template.environment import is_provider_template
from converge.errors import NotFound
from converge.resources.base import ResourcePlugin
from converge.resources.nested import ProviderTemplate

# (type name, module, class): every type converge ships. "Dummy" is the short name the
# proof of concept's docs use; a test checks each name against its class's ``type_name``.
BUILTIN_TYPES: tuple[tuple[str, str, str], ...] = (
    ("OS::Heat::None", "converge.resources.builtin.none", "NoneResource"),
    ("OS::Heat::TestResource", "converge.resources.builtin.testresource", "HeatTestResource"),
    ("OS::Heat::Value", "converge.resources.builtin.value", "ValueResource"),
    ("OS::Heat::RandomString", "converge.resources.builtin.random_string", "RandomString"),
    ("OS::Heat::Dummy", "converge.resources.builtin.dummy", "Dummy"),
    ("Dummy", "converge.resources.builtin.dummy", "Dummy"),
    ("OS::Heat::ResourceGroup", "converge.resources.group", "ResourceGroup"),
    ("OS::Heat::ResourceChain", "converge.resources.group", "ResourceChain"),
    ("PostgreSQL::Role", "converge.resources.postgres.role", "PostgresRole"),
    ("PostgreSQL::Database", "converge.resources.postgres.database", "PostgresDatabase"),
)
# Files, directories and processes of the engine's machine: only when enabled.
LOCAL_TYPES: tuple[tuple[str, str, str], ...] = (
    ("Local::Directory", "converge.resources.local.directory", "LocalDirectory"),
    ("Local::File", "converge.resources.local.file", "LocalFile"),
    ("Local::Process", "converge.resources.local.process", "LocalProcess"),
)

PluginLoader = Callable[[], type[ResourcePlugin]]


def _importer(module: str, class_name: str) -> PluginLoader:
    def load() -> type[ResourcePlugin]:
        plugin_class: type[ResourcePlugin] = getattr(importlib.import_module(module), class_name)
        return plugin_class

    return load


class PluginRegistry:
    """Plugins by resource type name; also the ``TypeSchemas`` template validation uses.

    A type that names a template file (a provider template) is served by the nested-stack
    plugin; its schema comes from the template itself, so ``lookup`` knows none.
    """

    def __init__(self) -> None:
        self._plugins: dict[str, ResourcePlugin] = {}
        self._schemas: dict[str, ResourceTypeSchema] = {}
        self._lazy: dict[str, PluginLoader] = {}  # registered, not imported yet
        self._provider = ProviderTemplate()

    def register_lazily(self, type_name: str, load: PluginLoader) -> None:
        """Add a type whose class ``load`` gives when the type is first used."""
        if type_name in self._plugins or type_name in self._lazy:
            raise ValueError(f"resource type {type_name!r} is already registered")
        self._lazy[type_name] = load

    def _loaded(self, type_name: str) -> bool:
        """Whether ``type_name`` is registered, importing its plugin if it waits to be."""
        load = self._lazy.pop(type_name, None)
        if load is not None:
            self.register(load(), type_name=type_name)
        return type_name in self._plugins

    def register(self, plugin_class: type[ResourcePlugin], *, type_name: str | None = None) -> None:
        """Add a type under its own ``type_name`` or the name given (an alias).

        Plugins are stateless, so one instance serves every resource of the type.
        """
        name = type_name or plugin_class.type_name
        self._loaded(name)  # a lazily registered one counts as registered
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
        if self._loaded(type_name):
            return self._plugins[type_name]
        if is_provider_template(type_name):
            return self._provider
        raise NotFound(self.unknown_type_message(type_name))

    def unknown_type_message(self, type_name: str) -> str:
        message = f"unknown resource type {type_name!r}"
        close = difflib.get_close_matches(type_name, self.type_names(), n=3)
        if close:
            return message + " (did you mean " + " or ".join(map(repr, close)) + "?)"
        return message + f"; known types: {', '.join(self.type_names())}"

    def lookup(self, type_name: str) -> ResourceTypeSchema | None:
        self._loaded(type_name)
        return self._schemas.get(type_name)

    def type_names(self) -> list[str]:
        return sorted({*self._plugins, *self._lazy})

    def __contains__(self, type_name: object) -> bool:
        if not isinstance(type_name, str):
            return False
        return (
            type_name in self._plugins or type_name in self._lazy or is_provider_template(type_name)
        )


def default_registry(*, enable_local_types: bool = True) -> PluginRegistry:
    """A new registry holding every built-in type (fresh each call: nothing shared).

    ``enable_local_types`` off leaves out the ``Local::*`` types (files, directories,
    processes on the engine's machine): a server taking templates from the network enables
    them only when its configuration says so.
    """
    registry = PluginRegistry()
    shipped = BUILTIN_TYPES + (LOCAL_TYPES if enable_local_types else ())
    for name, module, class_name in shipped:
        registry.register_lazily(name, _importer(module, class_name))
    return registry
