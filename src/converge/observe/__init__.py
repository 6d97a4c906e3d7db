"""The synchronizer: samplers per resource type, the baseline, change notifications."""

from __future__ import annotations

from converge.core.baseline import EntityState, Snapshot
from converge.observe.consumer import ChangeFilter, consume
from converge.observe.hub import Subscription
from converge.observe.sampler import SamplerStatus
from converge.observe.synchronizer import Synchronizer

__all__ = [
    "ChangeFilter",
    "EntityState",
    "SamplerStatus",
    "Snapshot",
    "Subscription",
    "Synchronizer",
    "consume",
]
