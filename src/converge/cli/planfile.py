"""Saved plans: what ``converge plan -o FILE`` wrote, and whether it still holds.

A plan file keeps everything the apply needs (template, environments, files map,
parameters, whether to compare with reality) and what the plan was made against: the
stack's fingerprint (status, update time, each resource's state and applied properties)
and the changes it showed. ``converge apply FILE`` plans again from the saved inputs and
applies only when both are unchanged, so what runs is what was reviewed, as with
``terraform apply PLANFILE``. The file may hold parameter values: it is written 0600.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from converge.errors import Conflict, InvalidRequest, NotFound

if TYPE_CHECKING:
    from converge.api import Converge

MARKER = "converge_plan"
VERSION = 1


@dataclass(frozen=True)
class SavedPlan:
    stack_name: str
    converge: bool
    sources: list[dict[str, str]]  # the template, then the environments: {text, filename}
    files: dict[str, str]
    parameters: dict[str, str]
    stack: dict[str, Any] | None  # the fingerprint the plan was made against
    changes: list[dict[str, Any]]

    def to_data(self) -> dict[str, Any]:
        return {
            MARKER: VERSION,
            "stack_name": self.stack_name,
            "converge": self.converge,
            "sources": self.sources,
            "files": self.files,
            "parameters": self.parameters,
            "stack": self.stack,
            "changes": self.changes,
        }


def is_plan_file(path: str) -> bool:
    """Whether ``path`` is a saved plan rather than a template (a JSON document marked so)."""
    try:
        with open(path, encoding="utf-8") as handle:
            start = handle.read(64).lstrip()
    except (OSError, UnicodeDecodeError):
        return False
    return start.startswith("{") and f'"{MARKER}"' in start


def write(path: str, plan: SavedPlan) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(plan.to_data(), handle, indent=1, default=str)
        handle.write("\n")


def read(path: str) -> SavedPlan:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InvalidRequest(f"{path}: not a readable plan file ({exc})") from None
    if not isinstance(data, dict) or data.get(MARKER) != VERSION:
        raise InvalidRequest(f"{path}: not a plan file of this converge (version {VERSION})")
    try:
        return SavedPlan(
            stack_name=str(data["stack_name"]),
            converge=bool(data["converge"]),
            sources=list(data["sources"]),
            files=dict(data["files"]),
            parameters=dict(data["parameters"]),
            stack=data["stack"],
            changes=list(data["changes"]),
        )
    except (KeyError, TypeError) as exc:
        raise InvalidRequest(f"{path}: a plan file without {exc}") from None


async def fingerprint(cv: Converge, stack_name: str) -> dict[str, Any] | None:
    """What the stack is now, as far as a plan depends on it; None when it does not exist."""
    try:
        stack = await cv.get_stack(stack_name)
    except NotFound:
        return None
    resources = await cv.list_resources(stack.id)
    return json.loads(
        json.dumps(
            {
                "id": stack.id,
                "stack_status": stack.stack_status,
                "updated_time": stack.updated_time,
                "resources": sorted(
                    (
                        [
                            r.resource_name,
                            r.resource_type,
                            r.resource_status,
                            r.physical_resource_id,
                            r.properties,
                        ]
                        for r in resources
                    ),
                    key=lambda item: (str(item[0]), str(item[3])),
                ),
            },
            default=str,
        )
    )


def check_still_valid(
    path: str,
    plan: SavedPlan,
    stack_now: Mapping[str, Any] | None,
    changes_now: Sequence[Mapping[str, Any]],
) -> None:
    """Refuse a plan that no longer describes what apply would do."""
    if stack_now != plan.stack:
        what = "was created" if plan.stack is None else "changed"
        if stack_now is None:
            what = "was deleted"
        raise Conflict(
            f"the plan in {path} is out of date: stack {plan.stack_name} {what} since it "
            "was made; run `converge plan` again"
        )
    canonical = json.loads(json.dumps(list(changes_now), default=str))
    if canonical != plan.changes:
        raise Conflict(
            f"the plan in {path} is out of date: applying now would not do what it shows "
            "(reality changed since); run `converge plan` again"
        )
