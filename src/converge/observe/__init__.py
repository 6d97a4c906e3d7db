"""The synchronizer: samplers per resource type, the baseline, change notifications.

Names are loaded on first use: ``converge.adapters.sql.entities`` imports the pure
``baseline`` module from here, and an eager import of the synchronizer would be circular.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Synchronizer": "converge.observe.synchronizer",
    "SamplerStatus": "converge.observe.sampler",
    "Snapshot": "converge.observe.baseline",
    "EntityState": "converge.observe.baseline",
    "consume": "converge.observe.consumer",
    "ChangeFilter": "converge.observe.consumer",
    "Subscription": "converge.observe.hub",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'converge.observe' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
