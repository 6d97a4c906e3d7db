"""Stored JSON reads back exactly, including what orjson alone would refuse."""

from __future__ import annotations

import json
import math

from hypothesis import example, given
from hypothesis import strategies as st

from converge.adapters import json_codec

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(_values)
@example(-(2**63) - 1)  # orjson alone reads it as a float
@example([2**64, {"k": -(2**64)}])
def test_round_trip_equals_the_standard_library(value: object) -> None:
    text = json_codec.dumps(value)
    assert json_codec.loads(text) == json.loads(text)


def test_nan_infinity_and_huge_integers_read_back() -> None:
    text = json_codec.dumps({"nan": math.nan, "inf": math.inf, "big": 2**80})
    value = json_codec.loads(text)
    assert math.isnan(value["nan"]) and value["inf"] == math.inf and value["big"] == 2**80


def test_integers_just_beyond_64_bits_stay_exact() -> None:
    for number in (-(2**63) - 1, 2**64, -(2**64) - 7):
        assert json_codec.loads(str(number)) == number
        assert json_codec.loads(str(number).encode()) == number
        assert isinstance(json_codec.loads(f"[{number}]")[0], int)
