"""Hidden values: recognised wherever they flow, never quoted by property validation."""

from __future__ import annotations

from converge.core.drift import compare
from converge.core.hidden import HiddenValues
from converge.core.schema import Constraint, PropertySchema, PropertyType, validate_properties

SECRETS = HiddenValues.of(["hunter2SECRET", 7, ["listed-secret"], {"k": True}, ""])


def test_hidden_values_are_recognised_whole_or_inside_longer_text() -> None:
    assert SECRETS.conceals("hunter2SECRET") and SECRETS.conceals("x=hunter2SECRET;")
    assert SECRETS.conceals(["a", {"b": "listed-secret"}])
    assert SECRETS.conceals(7) and SECRETS.conceals("7") and not SECRETS.conceals("17")
    assert SECRETS.conceals(True) and not SECRETS.conceals("untrue")
    assert not SECRETS.conceals("") and not SECRETS.conceals(None)
    assert not HiddenValues().conceals("hunter2SECRET")


def test_scrub_masks_quoted_and_bare_occurrences() -> None:
    message = "expected an integer, got 'hunter2SECRET' (role \"hunter2SECRET\"); 7 left"
    assert SECRETS.scrub(message) == (
        'expected an integer, got a hidden value (role "a hidden value"); 7 left'
    )


def test_type_and_constraint_problems_of_a_concealed_value_do_not_quote_it() -> None:
    schemas = {
        "limit": PropertySchema(PropertyType.INTEGER),
        "size": PropertySchema(PropertyType.NUMBER),
        "mode": PropertySchema(
            PropertyType.STRING, constraints=(Constraint("allowed_values", ["a", "b"]),)
        ),
        "groups": PropertySchema(PropertyType.LIST, item_schema=PropertySchema(PropertyType.MAP)),
    }
    values = {
        "limit": "hunter2SECRET",
        "size": "hunter2SECRET",
        "mode": "hunter2SECRET",
        "groups": ["hunter2SECRET"],
    }
    _, problems = validate_properties(values, schemas, conceals=SECRETS.conceals)
    assert {problem.path: problem.message for problem in problems} == {
        ("limit",): "expected an integer, got a hidden value",
        ("size",): "expected a number, got a hidden value",
        ("mode",): "\"the value\" is not an allowed value ['a', 'b']",
        ("groups", 0): "expected a map, got a hidden value",
    }
    _, problems = validate_properties(values, schemas)
    assert problems[0].message == "expected an integer, got 'hunter2SECRET'"


def test_a_property_the_type_declares_hidden_is_never_quoted() -> None:
    schemas = {
        "pin": PropertySchema(PropertyType.INTEGER, hidden=True),
        "pins": PropertySchema(
            PropertyType.LIST, hidden=True, item_schema=PropertySchema(PropertyType.INTEGER)
        ),
    }
    _, problems = validate_properties({"pin": "12a4", "pins": ["98b6"]}, schemas)
    assert [problem.message for problem in problems] == [
        "expected an integer, got a hidden value",
        "expected an integer, got a hidden value",
    ]


def test_drift_masks_what_a_hidden_parameter_gave() -> None:
    drift = compare({"a": "pw=hunter2SECRET", "b": 1}, {"a": "pw=x", "b": 2}, (), SECRETS.conceals)
    assert drift.detail == {
        "a": {"wanted": "******", "found": "******"},
        "b": {"wanted": 1, "found": 2},
    }
