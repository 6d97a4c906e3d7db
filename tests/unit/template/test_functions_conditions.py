"""equals, not, and, or, if (incl. inline conditions and the two-argument form), rejections."""

from __future__ import annotations

from typing import Any

import pytest
from test_functions_fakes import FakeContext, evaluate, parse, parse_condition

from converge.core.template import nodes
from converge.core.template.nodes import REMOVED, Function
from converge.errors import TemplateError

CONDITIONS = {"prod": True, "dev": False}


def condition(snippet: Any, version: str = "2021-04-16", **context: Any) -> Any:
    ctx = FakeContext(version=version, conditions=CONDITIONS, **context)
    return nodes.resolve(parse_condition(snippet, version), ctx)


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ({"equals": ["a", "a"]}, True),
        ({"equals": [{"get_param": "env"}, "prod"]}, True),
        ({"equals": [[1, {"a": None}], [1, {"a": None}]]}, True),
        ({"equals": [1, "1"]}, False),
        ({"not": "prod"}, False),
        ({"not": {"equals": ["a", "b"]}}, True),
        ({"not": True}, False),
        ({"and": ["prod", True, {"equals": [1, 1]}]}, True),
        ({"and": ["prod", "dev"]}, False),
        ({"or": ["dev", False]}, False),
        ({"or": ["dev", {"not": "dev"}]}, True),
        ({"contains": [{"get_param": "env"}, ["prod", "test"]]}, True),
    ],
)
def test_condition_functions(snippet: Any, expected: bool) -> None:
    assert condition(snippet, parameters={"env": "prod"}) is expected


def test_junctions_short_circuit_name_lookups_like_heat() -> None:
    assert condition({"or": ["prod", "undefined"]}) is True
    with pytest.raises(TemplateError, match="the condition 'undefined' is not defined"):
        condition({"and": ["prod", "undefined"]})


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ({"equals": ["a"]}, r"equals expects a list of two values"),
        ({"equals": "a"}, r"equals expects a list of two values"),
        ({"and": ["prod"]}, "and expects a list of at least two conditions"),
        ({"or": "prod"}, "or expects a list of at least two conditions"),
        ({"not": ["prod"]}, "not: expected a condition name, a boolean or a condition function"),
        ({"and": ["prod", 5]}, "and: expected a condition name, a boolean"),
        ({"not": None}, "not: expected a condition name"),
    ],
)
def test_condition_shapes_are_checked_at_parse_time(snippet: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse_condition(snippet)


def test_a_resolved_value_that_is_no_condition_is_an_error() -> None:
    with pytest.raises(TemplateError, match=r"not: expected a condition name.*not a number"):
        condition({"not": {"get_param": "n"}}, parameters={"n": 3})


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("get_attr", "get_attr is not allowed in a condition; use and, contains, equals"),
        ("get_resource", "get_resource is not allowed in a condition"),
        ("str_replace", "str_replace is not allowed in a condition"),
        ("yaql", "yaql is not supported by converge"),
    ],
)
def test_resource_functions_are_refused_in_conditions(name: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse_condition({"not": {name: ["x", "y"]}})


def test_conditions_table_before_pike_has_no_contains() -> None:
    assert parse_condition({"contains": ["a", ["a"]]}, "2017-02-24") == {"contains": ["a", ["a"]]}
    with pytest.raises(TemplateError, match=r"not: expected a condition name.*not a map"):
        parse_condition({"not": {"contains": ["a", ["a"]]}}, "2017-02-24")


@pytest.mark.parametrize(
    ("cond", "expected"),
    [
        ("prod", "big"),
        ("dev", "small"),
        (True, "big"),
        ({"equals": [{"get_param": "env"}, "prod"]}, "big"),
        ({"not": "prod"}, "small"),
        ({"and": ["prod", {"or": ["dev", True]}]}, "big"),
        ({"get_param": "flag"}, "small"),
    ],
)
def test_if_with_condition_names_and_inline_conditions(cond: Any, expected: str) -> None:
    snippet = {"if": [cond, "big", "small"]}
    result = evaluate(
        snippet, "2016-10-14", conditions=CONDITIONS, parameters={"env": "prod", "flag": False}
    )
    assert result == expected


def test_if_branches_may_hold_any_resource_function() -> None:
    snippet = {"if": ["prod", {"get_attr": ["db", "ip"]}, {"get_param": "ip"}]}
    resources = {"db": ("id", {"ip": "10.0.0.1"})}
    assert evaluate(snippet, conditions=CONDITIONS, resources=resources) == "10.0.0.1"


@pytest.mark.parametrize(
    ("cond", "message"),
    [
        ({"get_attr": ["db", "ip"]}, "get_attr is not allowed in a condition"),
        ({"equals": [{"get_resource": "db"}, "x"]}, "get_resource is not allowed in a condition"),
        ({"not": {"str_split": [",", "a"]}}, "str_split is not allowed in a condition"),
        (["prod"], "if: expected a condition name, a boolean or a condition function"),
        ({"bogus": 1}, "if: expected a condition name"),
    ],
)
def test_if_conditions_are_checked_at_parse_time(cond: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse({"if": [cond, 1, 2]})


def test_if_condition_errors_point_at_the_condition() -> None:
    with pytest.raises(TemplateError) as caught:
        parse({"if": [{"not": {"get_attr": ["db", "ip"]}}, 1, 2]})
    assert caught.value.path == "resources.server.properties.value.if[0].not"


def test_if_argument_shapes() -> None:
    with pytest.raises(
        TemplateError, match=r"if expects a list \[condition, value_if_true, value_if_false\]$"
    ):
        parse({"if": ["prod", 1]}, "2018-08-31")
    with pytest.raises(TemplateError, match=r"or \[condition, value_if_true\]"):
        parse({"if": ["prod"]})
    with pytest.raises(TemplateError, match="if expects a list"):
        parse({"if": "prod"})


def test_if_did_not_exist_before_newton() -> None:
    assert parse({"if": ["prod", 1, 2]}, "2016-04-08") == {"if": ["prod", 1, 2]}


def test_two_argument_if_removes_the_value_when_false_from_wallaby() -> None:
    snippet = {
        "keep": {"if": ["prod", "yes"]},
        "drop": {"if": ["dev", "yes"]},
        "items": ["a", {"if": ["dev", "b"]}, {"if": ["prod", "c"]}],
        "three": {"if": ["dev", "yes", None]},
    }
    assert evaluate(snippet, conditions=CONDITIONS) == {
        "keep": "yes",
        "items": ["a", "c"],
        "three": None,
    }
    assert nodes.resolve(parse({"if": ["dev", 1]}), FakeContext(conditions=CONDITIONS)) is REMOVED


def test_partial_evaluation_keeps_only_the_branch_taken() -> None:
    snippet = {
        "a": {"if": ["prod", {"get_attr": ["web", "ip"]}, {"get_attr": ["gone", "ip"]}]},
        "b": {"if": ["dev", {"get_resource": "gone"}]},
    }
    node = parse(snippet)
    before = {ref.resource for ref in nodes.references(node)}
    assert before == {"web", "gone"}  # conservative until conditions are known
    after = nodes.partial(node, FakeContext(conditions=CONDITIONS))
    assert set(after) == {"a"}
    assert isinstance(after["a"], Function) and after["a"].fn_name == "get_attr"
    assert {ref.resource for ref in nodes.references(after)} == {"web"}


def test_if_inside_conditions_from_wallaby() -> None:
    snippet = {"if": ["prod", {"equals": ["a", "a"]}, "dev"]}
    assert condition(snippet) is True
    with pytest.raises(TemplateError, match="if is not allowed in a condition"):
        parse_condition({"not": snippet}, "2018-08-31")


@pytest.mark.parametrize(
    ("version", "name", "message"),
    [
        (
            "2014-10-16",
            "Ref",
            "Ref is not supported from heat_template_version 2014-10-16 on; use get_resource",
        ),
        (
            "2016-10-14",
            "Fn::Join",
            "Fn::Join is not supported from heat_template_version 2014-10-16 on; use list_join",
        ),
        (
            "2015-10-15",
            "Fn::Select",
            "Fn::Select is not supported from heat_template_version 2015-10-15",
        ),
        ("2016-10-14", "yaql", "yaql is not supported by converge"),
    ],
)
def test_refused_functions_say_why_and_where(version: str, name: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message) as caught:
        parse({"outer": {name: ["x", "y"]}}, version)
    assert caught.value.path == "resources.server.properties.value.outer"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([1, ["a", "b"]], "b"),
        (["1", ["a", "b"]], "b"),
        ([5, ["a", "b"]], ""),
        (["k", {"k": "v"}], "v"),
        (["x", {"k": "v"}], ""),
        ([0, None], ""),
        ([0, '["j"]'], "j"),
    ],
)
def test_fn_select_until_2015_04_30(args: list[Any], expected: Any) -> None:
    assert evaluate({"Fn::Select": args}, "2015-04-30") == expected


def test_fn_select_of_deeply_nested_json_text_is_a_clear_error() -> None:
    text = "[" * 100_000 + "]" * 100_000  # was a RecursionError
    with pytest.raises(TemplateError, match="is neither a list nor a map"):
        evaluate({"Fn::Select": [0, text]}, "2015-04-30")
