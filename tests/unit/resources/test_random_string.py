"""OS::Heat::RandomString: length, classes, sequences and minimums, as Heat makes them."""

from __future__ import annotations

import string
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext, ValidationContext
from converge.resources.builtin.random_string import CHARACTER_CLASSES, RandomString, generate

DEFAULTS: dict[str, Any] = {
    name: schema.default for name, schema in RandomString.properties_schema.items()
}


def props(**overrides: Any) -> dict[str, Any]:
    return {**DEFAULTS, **overrides}


async def test_create_keeps_the_string_in_data(ctx: ResourceContext) -> None:
    plugin = RandomString()
    outcome = await plugin.create(ctx, props())
    value = outcome.data["value"]
    assert len(value) == 32
    assert set(value) <= set(string.ascii_letters + string.digits)
    assert outcome.physical_id == ctx.physical_name
    state = AppliedState(outcome.physical_id, props(), outcome.data)
    assert await plugin.attributes(ctx, state, ["value"]) == {"value": value}
    assert plugin.reference_id(state) == value


async def test_create_without_any_property_uses_heat_defaults(ctx: ResourceContext) -> None:
    outcome = await RandomString().create(ctx, {})
    assert len(outcome.data["value"]) == 32


async def test_two_creates_differ(ctx: ResourceContext) -> None:
    first = await RandomString().create(ctx, props())
    second = await RandomString().create(ctx, props())
    assert first.data["value"] != second.data["value"]


def test_no_property_is_update_allowed_so_salt_replaces() -> None:
    schemas = RandomString.properties_schema
    assert "salt" in schemas
    assert not any(schema.update_allowed for schema in schemas.values())


def test_sequence_only_draws_from_the_sequence_and_the_default_class() -> None:
    # Heat applies the default lettersdigits class even next to character_sequences.
    value = generate(props(length=40, character_sequences=[{"sequence": "!@#", "min": 5}]))
    assert len(value) == 40
    assert sum(char in "!@#" for char in value) >= 5
    assert sum(char in CHARACTER_CLASSES["lettersdigits"] for char in value) >= 1


def test_explicit_empty_classes_leave_only_sequences() -> None:
    value = generate(
        {"length": 12, "character_classes": [], "character_sequences": [{"sequence": "xy"}]}
    )
    assert set(value) <= {"x", "y"}


def test_deprecated_sequence_replaces_the_default_class() -> None:
    value = generate(props(length=50, sequence="digits"))
    assert value.isdigit() and len(value) == 50


def test_minimums_larger_than_length_are_refused_with_heats_message() -> None:
    with pytest.raises(ValueError, match="Length property cannot be smaller than combined"):
        generate(
            props(
                length=3,
                character_classes=[{"class": "digits", "min": 2}, {"class": "lowercase", "min": 2}],
            )
        )


async def test_impossible_properties_fail_create(ctx: ResourceContext) -> None:
    with pytest.raises(PermanentFailure, match="res: Length property"):
        await RandomString().create(
            ctx, props(length=1, character_classes=[{"class": "digits", "min": 2}])
        )


def test_validation_refuses_a_length_below_the_minimums_as_heat_does() -> None:
    # Heat's RandomString.validate: the stack is refused before anything is made.
    problems = list(
        RandomString().validate(
            {"length": 4, "character_classes": [{"class": "digits", "min": 5}]},
            ValidationContext(),
        )
    )
    assert [name for name, _ in problems] == ["length"]
    assert "minimums add up to 5" in problems[0][1]


def test_validation_takes_the_default_length_and_classes_when_absent() -> None:
    problems = RandomString().validate(
        {"character_sequences": [{"sequence": "ab", "min": 32}]}, ValidationContext()
    )
    # 32 from the sequence plus 1 from the default lettersdigits class exceed 32.
    assert [name for name, _ in problems] == ["length"]


def test_validation_leaves_a_length_known_only_later_to_create() -> None:
    problems = RandomString().validate(
        {"character_classes": [{"class": "digits", "min": 40}]},
        ValidationContext(unknown=frozenset({"length"})),
    )
    assert list(problems) == []


def test_bad_entries_get_clear_messages() -> None:
    with pytest.raises(ValueError, match=r"character_sequences\[0\]\.sequence"):
        generate(props(character_sequences=[{"sequence": ""}]))
    with pytest.raises(ValueError, match=r"character_classes\[0\]\.class must be one of"):
        generate(props(character_classes=[{"class": "emoji"}]))


entries = st.lists(
    st.tuples(st.sampled_from(sorted(CHARACTER_CLASSES)), st.integers(1, 4)), max_size=3
)
sequences = st.lists(
    st.tuples(st.text(alphabet="!@#$%^&*", min_size=1, max_size=4), st.integers(1, 4)),
    max_size=3,
)


@given(st.integers(1, 60), entries, sequences)
def test_generated_strings_meet_every_minimum(
    length: int, classes: list[tuple[str, int]], seqs: list[tuple[str, int]]
) -> None:
    properties = {
        "length": length,
        "character_classes": [{"class": name, "min": count} for name, count in classes],
        "character_sequences": [{"sequence": chars, "min": count} for chars, count in seqs],
    }
    if not classes and not seqs:
        return
    if sum(count for _, count in classes + seqs) > length:
        with pytest.raises(ValueError):
            generate(properties)
        return
    value = generate(properties)
    assert len(value) == length
    allowed = "".join(CHARACTER_CLASSES[name] for name, _ in classes) + "".join(
        chars for chars, _ in seqs
    )
    assert set(value) <= set(allowed)
    for name, count in classes:
        assert sum(char in CHARACTER_CLASSES[name] for char in value) >= count
    for chars, count in seqs:
        assert sum(char in chars for char in value) >= count
