"""Drift: how what a resource's stack wants differs from what is observed (pure)."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

MASK = "******"


class DriftStatus(StrEnum):
    IN_SYNC = "IN_SYNC"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    NOT_CHECKED = "NOT_CHECKED"


class DriftPolicy(StrEnum):
    NOTIFY = "notify"  # record the drift and emit an event
    HEAL = "heal"  # also converge the drifted resources back
    IGNORE = "ignore"  # do nothing


@dataclass(frozen=True)
class Drift:
    status: DriftStatus
    # property -> {"wanted": ..., "found": ...}; hidden properties are masked
    detail: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def describe(self) -> str:
        """One line for events: ``MODIFIED: value wanted 'a', found 'b'``."""
        if self.status != DriftStatus.MODIFIED:
            return str(self.status)
        parts = [
            f"{name} wanted {short_digest(change['wanted'])!r}, "
            f"found {short_digest(change['found'])!r}"
            for name, change in self.detail.items()
        ]
        return f"{self.status}: " + "; ".join(parts)


_DIGEST = re.compile(r"[0-9a-f]{40,128}")
SHORT_DIGEST = 12


def short_digest(value: Any) -> Any:
    """A hex digest (a content hash) cut to its first 12 digits, as git shows commits;
    two different contents differ there too. Anything else is returned as it is."""
    if isinstance(value, str) and _DIGEST.fullmatch(value):
        return value[:SHORT_DIGEST]
    return value


def compare(
    wanted: Mapping[str, Any],
    found: Mapping[str, Any] | None,
    hidden: Collection[str] = (),
    conceals: Callable[[Any], bool] | None = None,
) -> Drift:
    """Compare the essence of what was applied with the essence of what is there.

    ``found`` None means the real thing is gone. Only properties present in ``found`` are
    compared: a property the type cannot observe is not drift. Values of ``hidden``
    properties, and values ``conceals`` recognises (from hidden parameters), are masked.
    Purely computational.
    """
    if found is None:
        return Drift(DriftStatus.DELETED)

    def masked(name: str, before: Any, after: Any) -> bool:
        return name in hidden or (conceals is not None and (conceals(before) or conceals(after)))

    detail = {
        name: (
            {"wanted": MASK, "found": MASK}
            if masked(name, wanted.get(name), value)
            else {"wanted": wanted.get(name), "found": value}
        )
        for name, value in sorted(found.items())
        if wanted.get(name) != value
    }
    return Drift(DriftStatus.MODIFIED if detail else DriftStatus.IN_SYNC, detail)
