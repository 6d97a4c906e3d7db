"""The resource types converge ships: Heat's test types and the proof of concept's Dummy.

The registry (``converge.resources.registry``) names them; the classes are imported on
first use, here too (``from converge.resources.builtin import Dummy`` imports dummy.py
only), so loading one type does not load them all.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converge.resources.builtin.dummy import Dummy
    from converge.resources.builtin.none import NoneResource
    from converge.resources.builtin.random_string import RandomString
    from converge.resources.builtin.testresource import HeatTestResource
    from converge.resources.builtin.value import ValueResource

_MODULES = {
    "Dummy": "dummy",
    "HeatTestResource": "testresource",
    "NoneResource": "none",
    "RandomString": "random_string",
    "ValueResource": "value",
}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(importlib.import_module(f"{__name__}.{_MODULES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Dummy", "HeatTestResource", "NoneResource", "RandomString", "ValueResource"]
