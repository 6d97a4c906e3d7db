"""Records and views made by ``built`` (the listing's fast path) equal their constructors'."""

from __future__ import annotations

import dataclasses

import pytest

from converge.core.states import Action, Status
from converge.records import ResourceRecord, StackRecord, built
from converge.views import ResourceView


def _resource(**changes: object) -> ResourceRecord:
    record = ResourceRecord(
        id=7,
        stack_id="s",
        name="web",
        type="OS::Heat::RandomString",
        action=Action.CREATE,
        status=Status.COMPLETE,
        status_reason="state changed",
        physical_resource_id="p-1",
        current_template_id=3,
        requires=frozenset({1, 2}),
        replaces=None,
        replaced_by=None,
        engine_id=None,
        atomic_key=4,
        properties_data={"length": 8, "salt": "secret"},
        plugin_data={},
        attr_data={"value": "abc"},
        deletion_policy="Delete",
        hook_pending=None,
        cleared_hooks=(),
        created_at=1_700_000_000.5,
        updated_at=1_700_000_060.0,
    )
    return dataclasses.replace(record, **changes)


def test_built_equals_the_constructor_and_stays_frozen() -> None:
    record = _resource()
    made = built(ResourceRecord, dataclasses.asdict(record))
    assert made == record
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.name = "other"  # type: ignore[misc]


def test_built_refuses_missing_and_unknown_fields() -> None:
    values = dataclasses.asdict(_resource())
    del values["drift_status"]  # a field with a default: built fills in none
    with pytest.raises(TypeError, match=r"missing \['drift_status'\]"):
        built(ResourceRecord, values)
    with pytest.raises(TypeError, match=r"unknown \['colour'\]"):
        built(ResourceRecord, dataclasses.asdict(_resource()) | {"colour": "red"})


def test_state_is_heats_combined_form() -> None:
    assert _resource(action=Action.UPDATE, status=Status.FAILED).state == "UPDATE_FAILED"
    assert type(_resource().state) is str
    stack = StackRecord(
        id="s", name="n", project_id="p", action=Action.DELETE, status=Status.IN_PROGRESS,
        status_reason="", raw_template_id=None, prev_raw_template_id=None,
        current_traversal="", disable_rollback=False, timeout_mins=None,
        drift_policy="notify", atomic_key=0, created_at=0.0, updated_at=None, deadline=None,
    )  # fmt: skip
    assert stack.state == "DELETE_IN_PROGRESS"


def test_resource_view_masks_hidden_properties_only() -> None:
    view = ResourceView.of(_resource(), ["b", "a"], frozenset({"salt"}))
    assert view == ResourceView(
        resource_name="web",
        logical_resource_id="web",
        physical_resource_id="p-1",
        resource_type="OS::Heat::RandomString",
        resource_status="CREATE_COMPLETE",
        resource_status_reason="state changed",
        updated_time="2023-11-14T22:14:20Z",
        creation_time="2023-11-14T22:13:20Z",
        required_by=["a", "b"],
        drift_status="NOT_CHECKED",
        attributes={"value": "abc"},
        properties={"length": 8, "salt": "******"},
        id=7,
    )
    record = _resource()
    unmasked = ResourceView.of(record, [])
    assert unmasked.properties == {"length": 8, "salt": "secret"}
    # The view's dicts are copies: changing them leaves the record as it was.
    unmasked.properties["length"] = 1
    unmasked.attributes["value"] = "changed"
    assert record.properties_data == {"length": 8, "salt": "secret"}
    assert record.attr_data == {"value": "abc"}
