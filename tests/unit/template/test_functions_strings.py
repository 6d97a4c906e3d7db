"""str_replace (and strict forms), list_join, str_split, digest, make_url, repeat."""

from __future__ import annotations

import hashlib
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_functions_fakes import evaluate, parse

from converge.core.template.functions.repeat import MAX_REPEAT_VALUES
from converge.core.template.functions.strings import replace_placeholders
from converge.errors import TemplateError


def replace(
    template: Any, params: Any, version: str = "2021-04-16", fn: str = "str_replace"
) -> Any:
    return evaluate({fn: {"template": template, "params": params}}, version)


def test_str_replace_prefers_the_longest_placeholder() -> None:
    assert replace("$var1 $var10 $var", {"$var": "a", "$var1": "b", "$var10": "c"}) == "b c a"


def test_str_replace_breaks_ties_alphabetically() -> None:
    # both are two characters long: "Xb" sorts before "aX", so it is replaced first
    assert replace("aXb", {"aX": "1", "Xb": "2"}) == "a2"


def test_str_replace_does_not_rescan_substituted_values() -> None:
    assert replace("A B", {"A": "B", "B": "C"}) == "B C"


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, "x=."), (5, "x=5."), (1.5, "x=1.5."), (True, "x=True."), ("", "x=.")],
)
def test_str_replace_scalars(value: Any, expected: str) -> None:
    assert replace("x=V.", {"V": value}, "2013-05-23") == expected
    assert replace("x=V.", {"V": value}) == expected


def test_str_replace_json_encodes_maps_and_lists_from_2015_10_15() -> None:
    value = {"b": [1, 2], "a": None}
    assert replace("v=V", {"V": value}, "2015-10-15") == 'v={"a": null, "b": [1, 2]}'
    with pytest.raises(TemplateError, match="must be a string or a number, not a map"):
        replace("v=V", {"V": value}, "2015-04-30")


def test_str_replace_with_params_and_template_from_functions() -> None:
    snippet = {
        "str_replace": {
            "template": {"get_param": "tpl"},
            "params": {"get_param": "params"},
        }
    }
    params = {"tpl": "hello NAME", "params": {"NAME": "world"}}
    assert evaluate(snippet, parameters=params) == "hello world"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("text", "expects a map with 'template' and 'params'"),
        ({"template": "x"}, "expects a map with 'template' and 'params'"),
        ({"template": "x", "params": ["a"]}, "'params' must be a map, not a list"),
        ({"template": ["x"], "params": {}}, "'template' must be a string, not a list"),
        ({"template": "x", "params": {1: "a"}}, "placeholders in 'params' must be strings"),
        ({"template": "x", "params": {"": "a"}}, "a placeholder must not be empty"),
    ],
)
def test_str_replace_shapes_are_checked_at_parse_time(args: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message) as caught:
        parse({"str_replace": args})
    assert str(caught.value).startswith("stack.yaml:12: resources.server.properties.value: ")


def test_str_replace_checks_resolved_values() -> None:
    with pytest.raises(TemplateError, match="'template' must be a string, not a number"):
        evaluate(
            {"str_replace": {"template": {"get_param": "n"}, "params": {}}}, parameters={"n": 1}
        )
    with pytest.raises(TemplateError, match="'params' must be a map, not a string"):
        evaluate(
            {"str_replace": {"template": "", "params": {"get_param": "n"}}}, parameters={"n": "x"}
        )


def test_str_replace_strict_requires_every_param_in_the_template() -> None:
    assert replace("a B", {"B": "b"}, fn="str_replace_strict") == "a b"
    with pytest.raises(TemplateError, match="not found in the template: LONG, X"):
        replace("a B", {"B": "b", "X": "x", "LONG": "y"}, fn="str_replace_strict")
    # "B" only occurs inside "AB", which is replaced first: so "B" is not found
    with pytest.raises(TemplateError, match="not found in the template: B"):
        replace("AB", {"AB": "1", "B": "2"}, fn="str_replace_strict")
    assert replace("a", {"a": None}, fn="str_replace_strict") == ""


@pytest.mark.parametrize("value", [None, "", [], {}])
def test_str_replace_vstrict_refuses_null_and_empty_values(value: Any) -> None:
    with pytest.raises(TemplateError, match="the value of 'a' is null or empty"):
        replace("a", {"a": value}, fn="str_replace_vstrict")
    assert replace("a", {"a": [1]}, fn="str_replace_vstrict") == "[1]"


@given(
    st.text(alphabet="abcXYZ ", max_size=30),
    st.dictionaries(st.sampled_from(["X", "Y", "Z"]), st.text(alphabet="abc", max_size=5)),
)
def test_single_character_placeholders_act_like_sequential_replace(
    template: str, params: dict[str, str]
) -> None:
    # values never contain placeholders, so the order of replacement cannot matter
    expected = template
    for key, value in params.items():
        expected = expected.replace(key, value)
    assert replace_placeholders(template, params) == expected


@given(st.text(alphabet="ab$", max_size=20), st.text(alphabet="xy", max_size=3))
def test_replaced_text_never_holds_a_placeholder_that_values_cannot_make(
    template: str, value: str
) -> None:
    assert "$" not in replace_placeholders(template, {"$": value, "$$": value})


def test_list_join_before_2015_10_15_takes_one_list_of_strings() -> None:
    assert evaluate({"list_join": [", ", ["a", None, "c"]]}, "2013-05-23") == "a, , c"
    assert evaluate({"list_join": [",", None]}, "2015-04-30") == ""
    with pytest.raises(TemplateError, match="list_join expects a list like"):
        parse({"list_join": [",", ["a"], ["b"]]}, "2015-04-30")
    with pytest.raises(TemplateError, match="items to join must be strings, not a map"):
        evaluate({"list_join": [",", [{"a": 1}]]}, "2015-04-30")


def test_list_join_from_2015_10_15_joins_several_lists_and_json_encodes() -> None:
    snippet = {"list_join": ["-", ["a", "b"], [], None, [{"k": [1]}, ["x"]]]}
    assert evaluate(snippet, "2015-10-15") == 'a-b-{"k": [1]}-["x"]'


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ({"list_join": [","]}, "list_join expects a list like"),
        ({"list_join": ","}, "list_join expects a list like"),
        ({"list_join": [5, ["a"]]}, "the delimiter must be a string, not a number"),
    ],
)
def test_list_join_shapes(snippet: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse(snippet)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([",", "abc"], "must operate on lists, not a string"),
        ([",", [1]], "items to join must be strings, maps or lists, not a number"),
    ],
)
def test_list_join_resolved_values(args: list[Any], message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        evaluate({"list_join": args})


@given(st.lists(st.text(alphabet="abc ", max_size=5), max_size=6))
def test_list_join_and_str_split_round_trip(items: list[str]) -> None:
    joined = evaluate({"list_join": [",", items]})
    if items:
        assert evaluate({"str_split": [",", joined]}) == items


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([",", "a,b,c"], ["a", "b", "c"]),
        ([",", "a,b,c", 1], "b"),
        ([",", "a,b,c", "2"], "c"),
        ([",", "a,b,c", -1], "c"),
        ([",", None], None),
        ([", ", "a"], ["a"]),
    ],
)
def test_str_split(args: list[Any], expected: Any) -> None:
    assert evaluate({"str_split": args}) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([",", "a,b", 5], "index 5 is out of range; it must be between 0 and 1"),
        ([",", "a,b", "x"], "the index must be an integer"),
        (["", "a"], "the delimiter must be a non-empty string"),
        ([",", 5], "can only split a string, not a number"),
    ],
)
def test_str_split_errors(args: list[Any], message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        evaluate({"str_split": args})


def test_str_split_shape_and_version() -> None:
    with pytest.raises(TemplateError, match="str_split expects a list like"):
        parse({"str_split": "a,b"})
    assert parse({"str_split": [",", "a"]}, "2015-04-30") == {"str_split": [",", "a"]}


@pytest.mark.parametrize("algorithm", ["md5", "sha1", "sha256", "SHA512"])
def test_digest(algorithm: str) -> None:
    expected = hashlib.new(algorithm.lower(), "héllo".encode()).hexdigest()
    assert evaluate({"digest": [algorithm, "héllo"]}) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["sha256"], r"digest expects a list \[<algorithm>, <value>\]"),
        (["rot13", "x"], "unknown algorithm 'rot13'; use one of"),
        (["shake_128", "x"], "unknown algorithm 'shake_128'"),
    ],
)
def test_digest_errors(args: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse({"digest": args})
    with pytest.raises(TemplateError, match="the value must be a string, not a list"):
        evaluate({"digest": ["md5", ["x"]]})


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            {"scheme": "https", "host": "example.com", "port": 8443, "path": "/a b/c"},
            "https://example.com:8443/a%20b/c",
        ),
        (
            {"scheme": "http", "username": "u@x", "password": "p:w", "host": "h", "port": "80"},
            "http://u%40x:p%3Aw@h:80",
        ),
        ({"scheme": "http", "host": "::1", "path": "/"}, "http://[::1]/"),
        ({"scheme": "http", "host": "[fe80::1]"}, "http://[fe80::1]"),
        (
            {"host": "h", "query": {"a": "1/2", "b": "x y"}, "fragment": "top part"},
            "//h?a=1/2&b=x+y#top%20part",
        ),
        ({"scheme": "ftp", "username": "anon", "host": "h"}, "ftp://anon@h"),
    ],
)
def test_make_url(args: dict[str, Any], expected: str) -> None:
    assert evaluate({"make_url": args}) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("http://x", "make_url expects a map"),
        ({"hostname": "x"}, "unknown argument.s. hostname"),
        ({"port": 0}, "invalid port 0; it must be in 1-65535"),
        ({"port": "http"}, "invalid port 'http'"),
        ({"query": "a=1"}, "'query' must be a map, not a string"),
        ({"host": 5}, "'host' must be a string, not a number"),
    ],
)
def test_make_url_errors(args: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse({"make_url": args})


def test_make_url_scheme_must_not_hold_a_colon() -> None:
    with pytest.raises(TemplateError, match="the scheme must not contain ':'"):
        evaluate({"make_url": {"scheme": "http:", "host": "h"}})


def test_repeat_over_every_combination() -> None:
    snippet = {
        "repeat": {
            "template": {"port": "%port%", "cidr": "%net%", "%port%-key": ["%net%"]},
            "for_each": {"%port%": ["80", 443], "%net%": ["10/8"]},
        }
    }
    assert evaluate(snippet, "2015-04-30") == [
        {"port": "80", "cidr": "10/8", "80-key": ["10/8"]},
        {"port": "443", "cidr": "10/8", "443-key": ["10/8"]},
    ]


def test_repeat_with_functions_in_for_each_and_template() -> None:
    snippet = {
        "repeat": {
            "template": {"str_replace": {"template": "N-%i%", "params": {"N": {"get_param": "n"}}}},
            "for_each": {"%i%": {"get_param": "items"}},
        }
    }
    assert evaluate(snippet, parameters={"n": "web", "items": ["1", "2"]}) == ["web-1", "web-2"]


def test_repeat_over_map_keys_from_newton() -> None:
    snippet = {"repeat": {"template": "<%k%>", "for_each": {"%k%": {"a": 1, "b": 2}}}}
    assert evaluate(snippet, "2016-10-14") == ["<a>", "<b>"]
    with pytest.raises(TemplateError, match="must be lists; '%k%' is a map"):
        evaluate(snippet, "2016-04-08")


def test_repeat_without_permutations_zips_lists_from_pike() -> None:
    snippet = {
        "repeat": {
            "template": "%a%%b%",
            "for_each": {"%a%": ["1", "2"], "%b%": ["x", "y"]},
            "permutations": False,
        }
    }
    assert evaluate(snippet, "2017-09-01") == ["1x", "2y"]
    snippet["repeat"]["permutations"] = True
    assert evaluate(snippet) == ["1x", "1y", "2x", "2y"]
    with pytest.raises(
        TemplateError, match="'permutations' needs heat_template_version 2017-09-01"
    ):
        parse(snippet, "2017-02-24")


def test_repeat_without_permutations_needs_equally_long_lists() -> None:
    snippet = {
        "repeat": {
            "template": "%a%%b%",
            "for_each": {"%a%": ["1", "2"], "%b%": ["x"]},
            "permutations": False,
        }
    }
    with pytest.raises(TemplateError, match="must be equally long"):
        evaluate(snippet)
    snippet["repeat"]["for_each"] = {"%a%": {"k": 1}, "%b%": ["x"]}
    with pytest.raises(TemplateError, match="must be lists; '%a%' is a map"):
        evaluate(snippet)


def test_repeat_over_an_empty_or_null_list_is_empty() -> None:
    assert evaluate({"repeat": {"template": "x", "for_each": {"%a%": []}}}) == []
    assert evaluate({"repeat": {"template": "x", "for_each": {"%a%": None}}}) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"template": "x"}, "repeat expects a map like"),
        ({"template": "x", "for_each": ["a"]}, "'for_each' must be a map of loop variables"),
        ({"template": "x", "for_each": {}}, "needs at least one loop variable"),
        ({"template": "x", "for_each": {"a": []}, "permutations": "no"}, "must be a boolean"),
    ],
)
def test_repeat_shapes(args: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse({"repeat": args})


def test_repeat_loop_values_must_be_lists() -> None:
    with pytest.raises(TemplateError, match="must be lists or maps; '%a%' is a string"):
        evaluate({"repeat": {"template": "x", "for_each": {"%a%": "abc"}}})


def test_repeat_over_millions_of_combinations_is_refused_at_once() -> None:
    # 40**4 copies took seconds to make before any check could see their size.
    items = [str(i) for i in range(40)]
    loops = {f"%{name}%": items for name in "abcd"}
    started = time.perf_counter()
    with pytest.raises(TemplateError) as caught:
        evaluate({"repeat": {"template": "%a%%b%%c%%d%", "for_each": loops}})
    assert time.perf_counter() - started < 0.5
    assert caught.value.message == (
        "repeat would make 2560000 copies of a template of 1 values, 2560000 values, "
        f"more than the limit of {MAX_REPEAT_VALUES}; use shorter lists or fewer loop variables"
    )


def test_repeat_limit_counts_the_values_of_each_copy() -> None:
    template = {"k": ["%a%", "%b%"]}  # a map, a list and two strings: 4 values
    within = {"%a%": [str(i) for i in range(251)], "%b%": [str(i) for i in range(251)]}
    assert len(evaluate({"repeat": {"template": "%a%%b%", "for_each": within}})) == 63_001
    with pytest.raises(TemplateError, match="63001 copies of a template of 4 values"):
        evaluate({"repeat": {"template": template, "for_each": within}})
    zipped = {"template": template, "for_each": within, "permutations": False}
    assert len(evaluate({"repeat": zipped})) == 251
