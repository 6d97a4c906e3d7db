"""map_merge, map_replace, list_concat, list_concat_unique, filter, contains."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_functions_fakes import evaluate, parse

from converge.errors import TemplateError


def test_map_merge_later_maps_win_and_null_is_empty() -> None:
    snippet = {"map_merge": [{"a": 1, "b": 1}, None, {"b": 2}, {"get_param": "extra"}]}
    assert evaluate(snippet, "2016-04-08", parameters={"extra": {"c": 3}}) == {
        "a": 1,
        "b": 2,
        "c": 3,
    }


def test_map_merge_errors() -> None:
    with pytest.raises(TemplateError, match="map_merge expects a list of maps"):
        parse({"map_merge": {"a": 1}})
    with pytest.raises(TemplateError, match="items to merge must be maps, not a list"):
        evaluate({"map_merge": [{"a": 1}, ["b"]]})


def test_map_replace_keys_and_values() -> None:
    snippet = {
        "map_replace": [
            {"k1": "v1", "k2": "v2", "k3": ["unhashable"]},
            {"keys": {"k1": "K1"}, "values": {"v2": "V2"}},
        ]
    }
    assert evaluate(snippet) == {"K1": "v1", "k2": "V2", "k3": ["unhashable"]}


def test_map_replace_may_rename_a_key_to_itself_and_swap_nothing() -> None:
    snippet = {"map_replace": [{"a": 1}, {"keys": {"a": "a"}, "values": None}]}
    assert evaluate(snippet) == {"a": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([{"a": 1, "b": 2}, {"keys": {"a": "b"}}], "'b' collides with a key in the input map"),
        (
            [{"a": 1, "b": 2}, {"keys": {"a": "c", "b": "c"}}],
            "'c' collides with a key in the output",
        ),
        ([{"a": 1}, {"kes": {}}], "may only hold 'keys' and 'values', not kes"),
        ([["a"], {}], "the input must be a map, not a list"),
        ([{"a": 1}, {"keys": ["a"]}], "'keys' must be a map, not a list"),
    ],
)
def test_map_replace_errors(args: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        evaluate({"map_replace": args})


def test_map_replace_shape_at_parse_time() -> None:
    with pytest.raises(TemplateError, match="map_replace expects a list like"):
        parse({"map_replace": [{"a": 1}]})


def test_list_concat() -> None:
    snippet = {"list_concat": [["a", "b"], None, [], [{"c": 1}], {"get_param": "more"}]}
    assert evaluate(snippet, parameters={"more": ["a"]}) == ["a", "b", {"c": 1}, "a"]
    with pytest.raises(TemplateError, match="items to concatenate must be lists, not a string"):
        evaluate({"list_concat": [["a"], "b"]})
    with pytest.raises(TemplateError, match="list_concat expects a list of lists"):
        parse({"list_concat": "a"})


def test_list_concat_unique_keeps_each_values_last_occurrence() -> None:
    assert evaluate({"list_concat_unique": [["a", "b", "a"], ["c", "b"]]}) == ["a", "c", "b"]
    assert evaluate({"list_concat_unique": [[{"x": 1}, [1]], [{"x": 1}]]}) == [[1], {"x": 1}]


def _heat_unique(items: list[Any]) -> list[Any]:
    """Heat's own algorithm (delete earlier copies while iterating), as a reference."""
    result = list(items)
    for item in result:
        while result.count(item) > 1:
            del result[result.index(item)]
    return result


@given(st.lists(st.lists(st.sampled_from(["a", "b", "c", 1, 2]), max_size=5), max_size=4))
def test_list_concat_unique_matches_heat(lists: list[list[Any]]) -> None:
    flat = [item for items in lists for item in items]
    result = evaluate({"list_concat_unique": lists})
    assert len(result) == len(set(result)) and set(result) == set(flat)
    heat = _heat_unique(flat)
    # Heat's loop mutates the list it walks and may leave duplicates ([a, c, a, c, b, b]);
    # where it does not, the results agree (each value at its last occurrence).
    if len(heat) == len(set(heat)):
        assert result == heat


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([["a"], ["a", "b", "a", None]], ["b", None]),
        ([[None], ["a", None]], ["a"]),
        ([[], ["a"]], ["a"]),
        ([None, ["a"]], ["a"]),
        ([["a"], []], []),
        ([["a"], None], None),
    ],
)
def test_filter(args: list[Any], expected: Any) -> None:
    assert evaluate({"filter": args}, "2017-02-24") == expected


def test_filter_errors() -> None:
    with pytest.raises(
        TemplateError, match=r"filter expects a list \[<values to remove>, <list>\]"
    ):
        parse({"filter": [["a"]]})
    with pytest.raises(TemplateError, match="filter only works on lists, not a map"):
        evaluate({"filter": [["a"], {"a": 1}]})
    with pytest.raises(TemplateError, match="the values to remove must be a list, not a string"):
        evaluate({"filter": ["a", ["a"]]})


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["a", ["a", "b"]], True),
        (["c", ["a", "b"]], False),
        ([1, [1.0]], True),
        ([{"k": 1}, [{"k": 1}]], True),
        (["ell", "hello"], True),  # as in Heat, a string is searched for a substring
        ([1, "hello"], False),
    ],
)
def test_contains(args: list[Any], expected: bool) -> None:
    assert evaluate({"contains": args}) is expected


def test_contains_errors() -> None:
    with pytest.raises(TemplateError, match=r"contains expects a list \[<value>, <list>\]"):
        parse({"contains": ["a"]})
    with pytest.raises(TemplateError, match="the second argument must be a list, not a map"):
        evaluate({"contains": ["a", {"a": 1}]})
