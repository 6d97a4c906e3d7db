"""PluginRegistry: one plugin per type, schemas for validation, clear unknown-type errors."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from converge.core.schema import TypeSchemas
from converge.errors import NotFound
from converge.resources.base import AppliedState, Outcome, ResourceContext, ResourcePlugin
from converge.resources.builtin import Dummy
from converge.resources.registry import (
    BUILTIN_TYPES,
    LOCAL_TYPES,
    PluginRegistry,
    default_registry,
)

BUILTIN = {
    "OS::Heat::None",
    "OS::Heat::TestResource",
    "OS::Heat::Value",
    "OS::Heat::RandomString",
    "OS::Heat::Dummy",
    "Dummy",
    "OS::Heat::ResourceGroup",
    "OS::Heat::ResourceChain",
}
LOCAL = {"Local::Directory", "Local::File", "Local::Process"}
POSTGRES = {"PostgreSQL::Role", "PostgreSQL::Database"}


class Thing(ResourcePlugin):
    type_name = "My::Thing"

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        return Outcome("thing")

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        return None


def test_default_registry_has_every_builtin_type() -> None:
    registry = default_registry()
    assert set(registry.type_names()) == BUILTIN | LOCAL | POSTGRES
    assert set(default_registry(enable_local_types=False).type_names()) == BUILTIN | POSTGRES
    for name in BUILTIN:
        schema = registry.lookup(name)
        assert schema is not None and schema.type_name == name


def test_one_instance_per_type() -> None:
    registry = default_registry()
    assert registry.plugin("OS::Heat::Value") is registry.plugin("OS::Heat::Value")
    assert isinstance(registry.plugin("Dummy"), Dummy)


def test_each_call_builds_a_fresh_registry() -> None:
    first = default_registry()
    first.register(Thing)
    assert "My::Thing" in first
    assert "My::Thing" not in default_registry()


def test_registry_is_a_type_schemas() -> None:
    schemas: TypeSchemas = default_registry()
    assert schemas.lookup("OS::Nova::Server") is None


def test_unknown_type_suggests_close_names() -> None:
    with pytest.raises(
        NotFound,
        match=r"unknown resource type 'OS::Heat::RandomStrin' \(did you mean "
        r"'OS::Heat::RandomString'",
    ):
        default_registry().plugin("OS::Heat::RandomStrin")


def test_unknown_type_without_close_names_lists_known_ones() -> None:
    with pytest.raises(NotFound, match="known types: Dummy, Local::Directory"):
        default_registry().plugin("Zzz")


def test_a_name_cannot_be_taken_twice_by_different_classes() -> None:
    registry = PluginRegistry()
    registry.register(Thing)
    registry.register(Thing)  # the same class again is harmless
    with pytest.raises(ValueError, match="already registered to Thing"):
        registry.register(Dummy, type_name="My::Thing")


def test_each_shipped_type_name_is_its_class_loaded_on_first_use() -> None:
    registry = default_registry()
    for name, module, class_name in BUILTIN_TYPES + LOCAL_TYPES:
        plugin_class = type(registry.plugin(name))
        assert (plugin_class.__module__, plugin_class.__name__) == (module, class_name)
        assert name in (plugin_class.type_name, "Dummy")  # Dummy: the short alias


def test_a_lazily_registered_name_cannot_be_taken_twice() -> None:
    registry = default_registry()
    with pytest.raises(ValueError, match="already registered"):
        registry.register(Thing, type_name="OS::Heat::Value")
    registry.register(Dummy, type_name="Dummy")  # the same class again: nothing changes
    assert isinstance(registry.plugin("Dummy"), Dummy)
    with pytest.raises(ValueError, match="already registered"):
        registry.register_lazily("OS::Heat::Value", lambda: Thing)
