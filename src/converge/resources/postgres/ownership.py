"""Who a role or database belongs to: the ownership marker converge keeps in its comment.

A role or database that converge made, or adopted because the template said ``adopt:
true``, carries a comment naming the stack, the resource and the resource row (its physical
name) that manage it. The marker decides everything risky:

- create takes over an existing object only when the marker names this stack and resource
  (an interrupted create, a replacement row) or the template says ``adopt: true``;
- delete drops only what the marker says this very row manages (a replacement that took
  the object over keeps it), and never an adopted object unless the template's
  ``deletion_policy`` says ``Delete`` explicitly; an adopted object is released instead,
  its previous comment put back.

Markers written before stack and resource were recorded (``converge:<physical name>``)
are still read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from converge.core.schema import PropertySchema, PropertyType
from converge.errors import PermanentFailure
from converge.resources.base import ResourceContext

PREFIX = "converge:"
_LEGACY_SUFFIX = re.compile(r"-[0-9a-f]{8}")

ADOPT = PropertySchema(
    PropertyType.BOOLEAN,
    "Manage an existing one that converge did not make (otherwise finding one is an error). "
    "Its properties are converged to the template (a role's password only when the template "
    "sets one); on delete it is left in place, its comment restored, unless the resource's "
    "deletion_policy says Delete explicitly. When none exists, one is made and is converge's "
    "own. Only read when the resource is created.",
    default=False,
    update_allowed=True,
)


@dataclass(frozen=True)
class Marker:
    """What the comment of a managed role or database says about it."""

    stack_id: str
    resource: str
    physical_name: str  # the resource row that made or adopted it
    adopted: bool = False
    previous_comment: str | None = None  # the comment it had before it was adopted
    stack_name: str = ""  # for people reading the comment; stack_id decides

    @classmethod
    def made(cls, ctx: ResourceContext) -> Marker:
        return cls(ctx.stack_id, ctx.resource_name, ctx.physical_name, stack_name=ctx.stack_name)

    @classmethod
    def adopting(cls, ctx: ResourceContext, comment: str | None) -> Marker:
        return cls(
            ctx.stack_id,
            ctx.resource_name,
            ctx.physical_name,
            adopted=True,
            previous_comment=comment,
            stack_name=ctx.stack_name,
        )

    def taken_over_by(self, ctx: ResourceContext) -> Marker:
        """The same ownership, now held by the row in ``ctx`` (same stack and resource)."""
        return Marker(
            self.stack_id or ctx.stack_id,
            self.resource or ctx.resource_name,
            ctx.physical_name,
            self.adopted,
            self.previous_comment,
            ctx.stack_name,
        )

    def text(self) -> str:
        fields: dict[str, object] = {
            "stack": self.stack_name,
            "stack_id": self.stack_id,
            "resource": self.resource,
            "physical_name": self.physical_name,
        }
        if self.adopted:
            fields["adopted"] = True
            fields["previous_comment"] = self.previous_comment
        return PREFIX + json.dumps(fields, separators=(",", ":"))

    def belongs_to(self, ctx: ResourceContext) -> bool:
        """Whether the stack and resource in ``ctx`` manage it (any of their rows)."""
        if self.stack_id:
            return self.stack_id == ctx.stack_id and self.resource == ctx.resource_name
        if self.physical_name == ctx.physical_name:
            return True
        # A legacy marker names only the row: "<stack name>-<resource name>-<8 hex>".
        prefix = f"{ctx.stack_name}-{ctx.resource_name}"
        rest = self.physical_name.removeprefix(prefix)
        return rest != self.physical_name and _LEGACY_SUFFIX.fullmatch(rest) is not None

    def is_held_by(self, ctx: ResourceContext) -> bool:
        """Whether the very row in ``ctx`` manages it (not a replacement that took it over)."""
        return self.physical_name == ctx.physical_name and (
            not self.stack_id or self.stack_id == ctx.stack_id
        )

    def owner_words(self) -> str:
        """Who manages it, for messages."""
        if not self.stack_id:
            return f"converge resource row {self.physical_name!r}"
        stack = self.stack_name or self.stack_id
        return f"converge stack {stack!r}, resource {self.resource!r}"


def parse(comment: str | None) -> Marker | None:
    """The marker in a comment; None when the comment is not one (or there is none)."""
    if not comment or not comment.startswith(PREFIX):
        return None
    body = comment[len(PREFIX) :]
    if not body.startswith("{"):
        return Marker("", "", body) if body else None
    try:
        fields = json.loads(body)
    except ValueError:
        return None
    if not isinstance(fields, dict):
        return None
    previous = fields.get("previous_comment")
    return Marker(
        stack_id=str(fields.get("stack_id") or ""),
        resource=str(fields.get("resource") or ""),
        physical_name=str(fields.get("physical_name") or ""),
        adopted=fields.get("adopted") is True,
        previous_comment=previous if isinstance(previous, str) else None,
        stack_name=str(fields.get("stack") or ""),
    )


def held_by(ctx: ResourceContext, named_comments: Iterable[tuple[Any, Any]]) -> list[str]:
    """The names, among ``(name, comment)`` pairs, whose marker says the row in ``ctx``
    holds them."""
    held = []
    for name, comment in named_comments:
        marker = parse(comment if isinstance(comment, str) else None)
        if marker is not None and marker.is_held_by(ctx):
            held.append(str(name))
    return held


def takeover_marker(
    ctx: ResourceContext, kind: str, name: str, comment: str | None, adopt: bool
) -> Marker:
    """The marker to write on an existing object that create found, or a clear refusal.

    Ours (this stack and resource): taken over by this row, adopted or not as before.
    Anything else only with ``adopt: true``.
    """
    marker = parse(comment)
    if marker is not None and marker.belongs_to(ctx):
        return marker.taken_over_by(ctx)
    if adopt:
        return Marker.adopting(ctx, comment)
    here = f"stack {ctx.stack_name!r}, resource {ctx.resource_name!r}"
    if marker is None:
        whose = f"was not made by converge ({here})"
    else:
        whose = f"is managed by {marker.owner_words()}, not by {here}"
    raise PermanentFailure(
        f"{ctx.resource_name}: {kind} {name!r} already exists and {whose}; set adopt: true "
        "to manage it (it is then left in place on delete)"
    )


def update_marker(
    ctx: ResourceContext, kind: str, name: str, comment: str | None, adopt: bool
) -> Marker:
    """The marker to write when updating; a refusal when someone else manages it now.

    A marker that went missing (a comment changed by hand) is written again: the row's
    recorded id says converge manages it.
    """
    marker = parse(comment)
    if marker is None:
        return Marker.adopting(ctx, None) if adopt else Marker.made(ctx)
    if not marker.belongs_to(ctx):
        raise PermanentFailure(
            f"{ctx.resource_name}: {kind} {name!r} is now managed by {marker.owner_words()}; "
            "remove it from this template or from the other one"
        )
    return marker.taken_over_by(ctx)


class OnDelete(StrEnum):
    KEEP = "keep"  # not this row's: never made or adopted by it, or taken over since
    RELEASE = "release"  # adopted: put its previous comment back and leave it
    DROP = "drop"


def on_delete(ctx: ResourceContext, comment: str | None) -> OnDelete:
    """What delete does with the object it found under the resource's name."""
    marker = parse(comment)
    if marker is None or not marker.is_held_by(ctx):
        return OnDelete.KEEP
    if marker.adopted and ctx.deletion_policy != "Delete":
        return OnDelete.RELEASE
    return OnDelete.DROP
