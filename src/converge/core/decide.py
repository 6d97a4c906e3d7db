"""What must happen to one resource in a traversal: pure decisions over plain data.

Create and delete are updates from or to nothing: the update phase of a node decides
between CREATE, UPDATE (in place), REPLACE and NOTHING; the cleanup phase decides between
DELETE, RETAIN (forget, keep the real thing) and NOTHING.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from converge.core.schema import PropertySchema
from converge.core.states import Action, Status


class Change(StrEnum):
    NOTHING = "NOTHING"
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    REPLACE = "REPLACE"
    DELETE = "DELETE"
    RETAIN = "RETAIN"


@dataclass(frozen=True)
class Decision:
    change: Change
    reason: str
    changed_properties: tuple[str, ...] = ()


@dataclass(frozen=True)
class ResourceState:
    """The parts of a stored resource that decisions look at."""

    action: Action
    status: Status
    type: str
    properties: Mapping[str, Any]  # as last applied
    current_template_id: int | None
    has_physical_resource: bool


MISSING: Any = object()


def changed_properties(applied: Mapping[str, Any], desired: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of properties whose value differs (a missing key counts as None)."""
    names = sorted(set(applied) | set(desired))
    return tuple(name for name in names if applied.get(name) != desired.get(name))


def decide_update(
    state: ResourceState,
    desired_type: str,
    desired: Mapping[str, Any],
    schema: Mapping[str, PropertySchema],
    *,
    open_properties: bool = False,
    never_updates: bool = False,
    observed: Mapping[str, Any] | object | None = MISSING,
) -> Decision:
    """Decide the update phase for a resource.

    ``observed`` is the live state when the update compares against reality (MISSING when
    it does not; None when the real thing is gone). ``open_properties`` types accept any
    property and update every change in place; ``never_updates`` types (Heat's
    ``OS::Heat::None``) keep what exists whatever the properties say.

    Purely computational, no side-effects.
    """
    if state.action == Action.INIT:
        return Decision(Change.CREATE, "not created yet")
    if state.action == Action.CREATE and state.status == Status.IN_PROGRESS:
        # An interrupted create: run it again; plugins adopt what they already made.
        return Decision(Change.CREATE, "create was interrupted")
    if state.action == Action.DELETE and state.status == Status.COMPLETE:
        # Deleted by an operation this one superseded: nothing real is left to update.
        return Decision(Change.CREATE, "the resource was deleted: creating it again")
    if state.status == Status.FAILED and state.action == Action.CHECK:
        # Heat's _needs_update: a resource whose check failed is always replaced.
        return Decision(Change.REPLACE, "resource is CHECK_FAILED and is replaced by the update")
    if state.status == Status.FAILED:
        # CHECK_FAILED is a resource marked unhealthy: replaced whatever changed, as in Heat.
        if state.action not in (Action.CREATE, Action.CHECK) and not changed_properties(
            state.properties, desired
        ):
            # A failed update converging back to what was last applied (a rollback): the
            # original is kept and its known-good properties are applied again in place.
            return Decision(
                Change.UPDATE, f"resource is {state.action}_FAILED: re-applying its properties"
            )
        return Decision(
            Change.REPLACE, f"resource is {state.action}_FAILED and is replaced by the update"
        )
    if state.type != desired_type:
        return Decision(Change.REPLACE, f"type changed from {state.type} to {desired_type}")
    if observed is None:
        return Decision(Change.CREATE, "the real resource is gone")
    if never_updates:
        return Decision(Change.NOTHING, f"{desired_type} is never changed by an update")
    baseline: Mapping[str, Any] = state.properties
    if observed is not MISSING and isinstance(observed, Mapping):
        # Against reality: what the template wants vs what is there now. Properties the
        # plugin cannot observe keep the applied value.
        baseline = {**state.properties, **observed}
    changed = changed_properties(baseline, desired)
    if not changed:
        if state.status == Status.IN_PROGRESS:
            return Decision(Change.UPDATE, "previous update was interrupted")
        return Decision(Change.NOTHING, "no change")
    if open_properties:
        return Decision(Change.UPDATE, "properties changed", changed)
    fixed = [name for name in changed if not _update_allowed(schema, name)]
    if fixed:
        return Decision(
            Change.REPLACE,
            "changed properties that cannot be updated in place: " + ", ".join(fixed),
            changed,
        )
    return Decision(Change.UPDATE, "properties changed", changed)


def decide_converging(
    state: ResourceState,
    desired_type: str,
    desired: Mapping[str, Any],
    schema: Mapping[str, PropertySchema],
    *,
    open_properties: bool = False,
    never_updates: bool = False,
    observed: Mapping[str, Any] | object | None = MISSING,
    drifted: bool | None = None,
    converges_inside: bool = False,
    template_changed: bool = False,
) -> Decision:
    """``decide_update`` with what a traversal knows besides the properties: whether it
    looked at reality (``drifted``: whether the observation differed from what was
    applied; None when it did not look), whether the type converges a stack inside
    (``converges_inside``) and whether that stack's template changed. Apply and
    ``plan --converge`` both decide here, so they cannot disagree.

    Purely computational, no side-effects.
    """
    decision = decide_update(
        state,
        desired_type,
        desired,
        schema,
        open_properties=open_properties,
        never_updates=never_updates,
        observed=observed,
    )
    if drifted and decision.change == Change.NOTHING:
        # Reality differs in a way the properties do not show (a normalised form, a
        # derived field): apply the wanted properties again, in place.
        return Decision(Change.UPDATE, "reality drifted: re-applying the properties")
    if template_changed and decision.change == Change.NOTHING:
        return Decision(Change.UPDATE, "its provider template changed")
    if (
        converges_inside
        and decision.change == Change.REPLACE
        and state.status == Status.FAILED
        and state.has_physical_resource
        and state.type == desired_type
    ):
        # Heat's StackResource: a failed nested stack is updated, not replaced; its own
        # resources decide what they need.
        return Decision(Change.UPDATE, f"{decision.reason}: updating its nested stack")
    if drifted is not None and converges_inside and decision.change == Change.NOTHING:
        # What it holds may have drifted unseen from here: converge it too.
        return Decision(Change.UPDATE, "converging what it holds with reality")
    return decision


def _update_allowed(schema: Mapping[str, PropertySchema], name: str) -> bool:
    prop = schema.get(name)
    return prop is not None and prop.update_allowed


def decide_cleanup(
    is_current: bool,
    deletion_policy: str,
    *,
    replaced: bool = False,
    stack_deleted: bool = False,
) -> Decision:
    """Decide the cleanup phase: keep the resource the new template uses, remove the rest.

    The reason says why it goes: the stack is deleted (Heat's plain "state changed"), a
    new resource replaced it, or the template no longer has it.

    Purely computational, no side-effects.
    """
    if is_current:
        return Decision(Change.NOTHING, "in the current template")
    if deletion_policy == "Retain":
        return Decision(Change.RETAIN, "deletion_policy is Retain: the real resource is kept")
    if stack_deleted:
        return Decision(Change.DELETE, "state changed")
    if replaced:
        return Decision(Change.DELETE, "replaced by a new resource")
    return Decision(Change.DELETE, "not in the current template")


def restriction(decision: Decision, restricted_actions: frozenset[str], name: str) -> str | None:
    """Why the environment's ``restricted_actions`` forbid this decision; None if they do not.

    As in Heat: ``update`` forbids an in-place update, ``replace`` a replacement; the
    resource then fails and is left as it is.

    Purely computational, no side-effects.
    """
    action = {Change.UPDATE: "update", Change.REPLACE: "replace"}.get(decision.change)
    if action is None or action not in restricted_actions:
        return None
    return f"ResourceActionRestricted: resources.{name}: {action} is restricted for resource."
