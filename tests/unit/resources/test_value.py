"""OS::Heat::Value: the value attribute, typed by ``type``; updates in place."""

from __future__ import annotations

from typing import Any

import pytest

from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext
from converge.resources.builtin.value import ValueResource, convert_value


async def test_value_attribute_and_physical_name(ctx: ResourceContext) -> None:
    plugin = ValueResource()
    properties = {"value": {"a": [1, 2]}}
    outcome = await plugin.create(ctx, properties)
    assert outcome.physical_id == ctx.physical_name
    state = AppliedState(outcome.physical_id, properties, outcome.data)
    assert await plugin.attributes(ctx, state, ["value"]) == {"value": {"a": [1, 2]}}
    assert await plugin.attributes(ctx, state, []) == {}


def test_every_property_is_update_allowed() -> None:
    assert all(schema.update_allowed for schema in ValueResource.properties_schema.values())
    assert ValueResource.properties_schema["value"].required


async def test_update_keeps_the_physical_id(ctx: ResourceContext) -> None:
    state = AppliedState("pid", {"value": 1})
    outcome = await ValueResource().update(ctx, state, {"value": 2, "type": "number"})
    assert outcome.physical_id == "pid"


@pytest.mark.parametrize(
    ("value", "value_type", "expected"),
    [
        ("x", None, "x"),
        ([1], None, [1]),
        (5, "string", "5"),
        (True, "string", "True"),
        ("12", "number", 12),
        ("1.5", "number", 1.5),
        (3.25, "number", 3.25),
        (["a", "b"], "comma_delimited_list", ["a", "b"]),
        ({"k": 1}, "json", {"k": 1}),
        ("TRUE", "boolean", True),
        ("false", "boolean", False),
        (False, "boolean", False),
    ],
)
def test_convert_value_follows_heat_property_types(
    value: Any, value_type: str | None, expected: Any
) -> None:
    assert convert_value(value, value_type) == expected


@pytest.mark.parametrize(
    ("value", "value_type", "message"),
    [
        (1.5, "string", "must be a string"),
        ("abc", "number", "is not a number"),
        ("a,b", "comma_delimited_list", "is not a list"),
        ([1], "json", "is not a map"),
        ("yes", "boolean", "is not a valid boolean"),
    ],
)
def test_convert_value_rejects_mismatches(value: Any, value_type: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        convert_value(value, value_type)


async def test_mismatched_value_fails_create_naming_the_property(ctx: ResourceContext) -> None:
    with pytest.raises(PermanentFailure, match=r"res: properties.value: 'abc' is not a number"):
        await ValueResource().create(ctx, {"value": "abc", "type": "number"})
