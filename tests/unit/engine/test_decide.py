"""The per-resource decision table: create, update in place, replace, nothing, delete."""

from __future__ import annotations

import pytest

from converge.core.decide import (
    MISSING,
    Change,
    Decision,
    ResourceState,
    changed_properties,
    decide_cleanup,
    decide_update,
    restriction,
)
from converge.core.schema import PropertySchema, PropertyType
from converge.core.states import Action, Status

SCHEMA = {
    "size": PropertySchema(PropertyType.INTEGER, update_allowed=True),
    "image": PropertySchema(PropertyType.STRING),
}


def state(
    action: Action = Action.CREATE, status: Status = Status.COMPLETE, **props: object
) -> ResourceState:
    return ResourceState(
        action=action,
        status=status,
        type="T",
        properties=props or {"size": 1, "image": "a"},
        current_template_id=1,
        has_physical_resource=True,
    )


@pytest.mark.parametrize(
    ("current", "desired", "expected"),
    [
        (state(Action.INIT), {"size": 1, "image": "a"}, Change.CREATE),
        (state(Action.CREATE, Status.IN_PROGRESS), {"size": 1, "image": "a"}, Change.CREATE),
        (state(Action.CREATE, Status.FAILED), {"size": 1, "image": "a"}, Change.REPLACE),
        (state(Action.UPDATE, Status.FAILED), {"size": 1, "image": "a"}, Change.UPDATE),
        (state(Action.UPDATE, Status.FAILED), {"size": 2, "image": "a"}, Change.REPLACE),
        # Marked unhealthy (Heat's CHECK_FAILED): always replaced, as in Heat.
        (state(Action.CHECK, Status.FAILED), {"size": 1, "image": "a"}, Change.REPLACE),
        (state(), {"size": 1, "image": "a"}, Change.NOTHING),
        (state(), {"size": 2, "image": "a"}, Change.UPDATE),
        (state(), {"size": 1, "image": "b"}, Change.REPLACE),
        (state(), {"size": 2, "image": "b"}, Change.REPLACE),
        (state(Action.UPDATE, Status.IN_PROGRESS), {"size": 1, "image": "a"}, Change.UPDATE),
    ],
)
def test_update_decision_table(
    current: ResourceState, desired: dict[str, object], expected: Change
) -> None:
    assert decide_update(current, "T", desired, SCHEMA).change == expected


def test_type_change_replaces() -> None:
    decision = decide_update(state(), "Other", {"size": 1, "image": "a"}, SCHEMA)
    assert decision.change == Change.REPLACE
    assert "type changed from T to Other" in decision.reason


def test_replace_reason_names_fixed_properties() -> None:
    decision = decide_update(state(), "T", {"size": 2, "image": "b"}, SCHEMA)
    assert decision.reason.endswith("image")
    assert decision.changed_properties == ("image", "size")


def test_open_properties_update_everything_in_place() -> None:
    decision = decide_update(state(), "T", {"image": "z"}, SCHEMA, open_properties=True)
    assert decision.change == Change.UPDATE


def test_reality_gone_is_created_again() -> None:
    assert (
        decide_update(state(), "T", {"size": 1, "image": "a"}, SCHEMA, observed=None).change
        == Change.CREATE
    )


def test_reality_drift_is_corrected() -> None:
    desired = {"size": 1, "image": "a"}
    assert (
        decide_update(state(), "T", desired, SCHEMA, observed={"size": 5}).change == Change.UPDATE
    )
    assert (
        decide_update(state(), "T", desired, SCHEMA, observed={"size": 1}).change == Change.NOTHING
    )
    assert decide_update(state(), "T", desired, SCHEMA, observed=MISSING).change == Change.NOTHING


def test_changed_properties_counts_missing_keys() -> None:
    assert changed_properties({"a": 1}, {"a": 1, "b": None}) == ()
    assert changed_properties({"a": 1}, {"b": 2}) == ("a", "b")


@pytest.mark.parametrize(
    ("current", "policy", "expected"),
    [
        (True, "Delete", Change.NOTHING),
        (False, "Delete", Change.DELETE),
        (False, "Snapshot", Change.DELETE),
        (False, "Retain", Change.RETAIN),
        (True, "Retain", Change.NOTHING),
    ],
)
def test_cleanup_decision_table(current: bool, policy: str, expected: Change) -> None:
    assert decide_cleanup(current, policy).change == expected


def test_a_row_deleted_by_a_superseded_operation_is_created_again() -> None:
    # Heat's _needs_update: DELETE_COMPLETE never updates in place.
    deleted = ResourceState(
        action=Action.DELETE,
        status=Status.COMPLETE,
        type="T",
        properties={"a": 1},
        current_template_id=1,
        has_physical_resource=False,
    )
    decision = decide_update(deleted, "T", {"a": 1}, {})
    assert decision.change == Change.CREATE


def test_restricted_actions_forbid_only_the_change_they_name() -> None:
    update = Decision(Change.UPDATE, "properties changed")
    replace = Decision(Change.REPLACE, "type changed")
    assert restriction(update, frozenset({"update"}), "db") == (
        "ResourceActionRestricted: resources.db: update is restricted for resource."
    )
    assert restriction(replace, frozenset({"update"}), "db") is None
    assert restriction(replace, frozenset({"replace"}), "db") is not None
    for change in (Change.CREATE, Change.NOTHING, Change.DELETE):
        assert restriction(Decision(change, ""), frozenset({"update", "replace"}), "db") is None


def test_cleanup_reasons_say_why_a_resource_goes() -> None:
    assert decide_cleanup(False, "Delete").reason == "not in the current template"
    assert decide_cleanup(False, "Delete", replaced=True).reason == "replaced by a new resource"
    # Heat's plain reason for a stack delete.
    assert decide_cleanup(False, "Delete", stack_deleted=True).reason == "state changed"
    assert decide_cleanup(False, "Retain", stack_deleted=True).change == Change.RETAIN
