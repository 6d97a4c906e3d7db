"""Property coercion and constraints (core.schema), shared by properties and parameters."""

from __future__ import annotations

import pytest

from converge.core.schema import (
    Constraint,
    PropertySchema,
    PropertyType,
    check_constraints,
    coerce_property,
    constraint_shape_problem,
    to_boolean,
    to_number,
    validate_properties,
)

S = PropertyType.STRING


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        (PropertyType.STRING, 3, "3"),
        (PropertyType.STRING, True, "true"),
        (PropertyType.INTEGER, "42", 42),
        (PropertyType.NUMBER, "2.5", 2.5),
        (PropertyType.NUMBER, "7", 7),
        (PropertyType.BOOLEAN, "yes", True),
        (PropertyType.BOOLEAN, "Off", False),
        (PropertyType.LIST, ("a",), ["a"]),
        (PropertyType.MAP, {"a": 1}, {"a": 1}),
        (PropertyType.ANY, [1, {"x": 2}], [1, {"x": 2}]),
    ],
)
def test_coercion_follows_heat(kind: PropertyType, value: object, expected: object) -> None:
    coerced, problems = coerce_property(value, PropertySchema(kind))
    assert problems == []
    assert coerced == expected


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        (PropertyType.STRING, [1], "expected a string, got a list"),
        (PropertyType.INTEGER, "2.5", "expected an integer, got 2.5"),
        (PropertyType.INTEGER, True, "expected an integer, got a boolean"),
        (PropertyType.NUMBER, "many", "expected a number, got 'many'"),
        (PropertyType.BOOLEAN, "maybe", "expected a boolean"),
        (PropertyType.LIST, "a,b", "expected a list, got a string"),
        (PropertyType.MAP, [1], "expected a map, got a list"),
    ],
)
def test_wrong_types_are_reported(kind: PropertyType, value: object, message: str) -> None:
    _, problems = coerce_property(value, PropertySchema(kind), path=("p",))
    assert len(problems) == 1
    assert problems[0].path == ("p",)
    assert message in problems[0].message


def test_constraint_messages_match_heat() -> None:
    assert check_constraints("abcdef", (Constraint("length", {"max": 3}),)) == (
        "length (6) is out of range (min: None, max: 3)"
    )
    assert check_constraints(11, (Constraint("range", {"min": 1, "max": 10}),)) == (
        "11 is out of range (min: 1, max: 10)"
    )
    assert check_constraints(4, (Constraint("modulo", {"step": 2, "offset": 1}),)) == (
        "4 is not a multiple of 2 with an offset of 1"
    )
    assert check_constraints("c", (Constraint("allowed_values", ["a", "b"]),)) == (
        "\"c\" is not an allowed value ['a', 'b']"
    )
    assert check_constraints("ab1", (Constraint("allowed_pattern", "[a-z]+"),)) == (
        '"ab1" does not match pattern "[a-z]+"'
    )
    assert check_constraints("ab", (Constraint("allowed_pattern", "[a-z]+"),)) is None
    assert check_constraints(5, (Constraint("range", {"min": 1}, "Too small or big"),)) is None
    assert check_constraints(0, (Constraint("range", {"min": 1}, "Too small"),)) == "Too small"
    assert check_constraints("x", (Constraint("custom_constraint", "nova.flavor"),)) is None


def test_hidden_values_never_appear() -> None:
    schema = PropertySchema(S, hidden=True, constraints=(Constraint("allowed_values", ["a"]),))
    _, problems = coerce_property("s3cret", schema)
    assert problems
    assert "s3cret" not in problems[0].message


def test_allowed_values_compare_numbers_with_text_and_check_list_items() -> None:
    assert check_constraints(2, (Constraint("allowed_values", ["1", "2"]),)) is None
    assert check_constraints(["a", "z"], (Constraint("allowed_values", ["a", "b"]),)) == (
        "\"z\" is not an allowed value ['a', 'b']"
    )
    assert check_constraints(True, (Constraint("allowed_values", [1]),)) is not None


@pytest.mark.parametrize(
    ("constraint", "problem"),
    [
        (Constraint("length", [1]), "length needs a map with min and/or max"),
        (Constraint("range", {"min": "x"}), "range: expected a number"),
        (Constraint("modulo", {"step": 0, "offset": 0}), "modulo step must not be 0"),
        (Constraint("modulo", {"step": 2, "offset": 3}), "offset must be smaller"),
        (Constraint("allowed_pattern", "("), "not a valid regular expression"),
        (Constraint("allowed_values", "a"), "allowed_values needs a list"),
        (Constraint("bogus", 1), "unknown constraint 'bogus'"),
    ],
)
def test_bad_constraints_are_described(constraint: Constraint, problem: str) -> None:
    message = constraint_shape_problem(constraint)
    assert message is not None and problem in message


def test_validate_properties_defaults_required_unknown_and_nested() -> None:
    schemas = {
        "image": PropertySchema(S, required=True),
        "size": PropertySchema(PropertyType.INTEGER, default=1),
        "tags": PropertySchema(PropertyType.LIST, item_schema=PropertySchema(PropertyType.INTEGER)),
        "net": PropertySchema(
            PropertyType.MAP, map_schema={"port": PropertySchema(PropertyType.INTEGER)}
        ),
    }
    values, problems = validate_properties(
        {"imgae": "x", "tags": [1, "b"], "net": {"port": "80", "prot": 1}}, schemas
    )
    messages = {(p.path, p.message) for p in problems}
    assert (("imgae",), "unknown property 'imgae' (did you mean 'image'?)") in messages
    assert ((), "missing required property 'image'") in messages
    assert any(path == ("tags", 1) for path, _ in messages)
    assert any(path == ("net", "prot") for path, _ in messages)
    assert values["size"] == 1
    assert values["net"] == {"port": 80}


def test_null_counts_as_not_given_and_deferred_values_are_skipped() -> None:
    schemas = {"a": PropertySchema(S, required=True), "b": PropertySchema(PropertyType.INTEGER)}
    marker = object()
    values, problems = validate_properties(
        {"a": None, "b": marker}, schemas, is_deferred=lambda v: v is marker
    )
    assert [p.message for p in problems] == ["missing required property 'a'"]
    assert values["b"] is marker


def test_open_properties_accept_anything() -> None:
    values, problems = validate_properties({"x": [1]}, {}, open_properties=True)
    assert problems == [] and values == {"x": [1]}


def test_scalar_helpers() -> None:
    assert to_boolean(1) is True and to_boolean("f") is False
    with pytest.raises(ValueError):
        to_number("nan")
    with pytest.raises(ValueError):
        to_boolean([])
