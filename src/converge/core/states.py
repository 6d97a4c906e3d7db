"""Stack and resource states as enums, and the resource transition table checked in one place."""

from __future__ import annotations

from enum import StrEnum

from converge.errors import InvalidTransition


class Action(StrEnum):
    INIT = "INIT"
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    ROLLBACK = "ROLLBACK"
    CHECK = "CHECK"


class Status(StrEnum):
    IN_PROGRESS = "IN_PROGRESS"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


def state_name(action: Action | str, status: Status | str) -> str:
    """Heat's combined form: ``CREATE_COMPLETE``."""
    return f"{action}_{status}"


# What a resource may become from each status. Any action may start from a settled
# state (COMPLETE/FAILED); an IN_PROGRESS action may only settle, or be taken over by a
# new traversal (a superseding update, or a delete while the create still ran).
_RESOURCE_TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.COMPLETE: frozenset({Status.IN_PROGRESS, Status.COMPLETE}),
    Status.FAILED: frozenset({Status.IN_PROGRESS, Status.FAILED, Status.COMPLETE}),
    Status.IN_PROGRESS: frozenset({Status.IN_PROGRESS, Status.COMPLETE, Status.FAILED}),
}


def check_resource_transition(
    resource: str, old: tuple[Action, Status], new: tuple[Action, Status]
) -> None:
    """Raise ``InvalidTransition`` naming the resource and both states if not allowed."""
    old_action, old_status = old
    new_action, new_status = new
    allowed = _RESOURCE_TRANSITIONS[old_status]
    if new_status not in allowed:
        raise InvalidTransition(
            f"resource {resource}: cannot go from {state_name(old_action, old_status)} "
            f"to {state_name(new_action, new_status)}"
        )
    if new_action == Action.INIT and old_action != Action.INIT:
        raise InvalidTransition(
            f"resource {resource}: cannot go back from {state_name(old_action, old_status)} "
            f"to {state_name(new_action, new_status)}"
        )
