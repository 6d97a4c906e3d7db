"""The resource types converge ships: Heat's test types and the proof of concept's Dummy."""

from __future__ import annotations

from converge.resources.base import ResourcePlugin
from converge.resources.builtin.dummy import Dummy
from converge.resources.builtin.none import NoneResource
from converge.resources.builtin.random_string import RandomString
from converge.resources.builtin.testresource import HeatTestResource
from converge.resources.builtin.value import ValueResource

# (type name, plugin class): "Dummy" is the short name the proof of concept's docs use.
BUILTIN_TYPES: tuple[tuple[str, type[ResourcePlugin]], ...] = (
    (NoneResource.type_name, NoneResource),
    (HeatTestResource.type_name, HeatTestResource),
    (ValueResource.type_name, ValueResource),
    (RandomString.type_name, RandomString),
    (Dummy.type_name, Dummy),
    ("Dummy", Dummy),
)

__all__ = [
    "BUILTIN_TYPES",
    "Dummy",
    "HeatTestResource",
    "NoneResource",
    "RandomString",
    "ValueResource",
]
