"""Stored JSON reads back exactly, including what orjson alone would refuse."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from converge.adapters import json_codec

_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


@given(_values)
def test_round_trip_equals_the_standard_library(value: object) -> None:
    text = json_codec.dumps(value)
    assert json_codec.loads(text) == json.loads(text)


def test_nan_infinity_and_huge_integers_read_back() -> None:
    text = json_codec.dumps({"nan": math.nan, "inf": math.inf, "big": 2**80})
    value = json_codec.loads(text)
    assert math.isnan(value["nan"]) and value["inf"] == math.inf and value["big"] == 2**80
