"""Rows read on SQLite's own connection decode their JSON columns as the decoder would."""

from __future__ import annotations

from typing import Any

from converge.adapters import json_codec
from converge.adapters.sql.sqlite_hot import _RESOURCE


def _row_with(text: str | None) -> Any:
    values = [None] * len(_RESOURCE.columns)
    values[_RESOURCE.columns.index("properties_data")] = text
    values[_RESOURCE.columns.index("attr_data")] = text
    return _RESOURCE.row(values)


def test_json_columns_decode_as_the_decoder_does() -> None:
    for text in ["{}", "[]", "null", '{"a": [1, {}]}', "[]\n", '"x"', "0"]:
        row = _row_with(text)
        assert row.properties_data == json_codec.loads(text)
    assert _row_with(None).properties_data is None


def test_empty_values_are_fresh_objects_per_column() -> None:
    # A shared {} would let one record's change show in another's.
    for text in ["{}", "[]"]:
        row = _row_with(text)
        assert row.properties_data is not row.attr_data
        assert row.properties_data is not _row_with(text).properties_data
