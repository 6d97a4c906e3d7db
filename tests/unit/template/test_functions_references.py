"""get_param, get_resource, get_attr, get_file and resource_facade."""

from __future__ import annotations

from typing import Any

import pytest
from test_functions_fakes import FakeContext, evaluate, parse

from converge.core.template import nodes
from converge.core.template.nodes import ALL_ATTRIBUTES, Function, Reference
from converge.errors import TemplateError

PARAMS = {
    "name": "web",
    "config": {"ports": [80, 443], "tls": {"cert": "abc"}},
    "zones": ["a", "b"],
    "empty": None,
}


@pytest.mark.parametrize(
    ("snippet", "expected"),
    [
        ({"get_param": "name"}, "web"),
        ({"get_param": "OS::stack_name"}, "demo"),
        ({"get_param": ["config", "tls", "cert"]}, "abc"),
        ({"get_param": ["config", "ports", 1]}, 443),
        ({"get_param": ["config", "ports", "0"]}, 80),  # a numeric string indexes a list
        ({"get_param": ["zones", 5]}, ""),  # a path that does not fit gives ""
        ({"get_param": ["config", "missing", "deeper"]}, ""),
        ({"get_param": ["config", "ports", "x"]}, ""),
        ({"get_param": ["empty", "key"]}, ""),
        ({"get_param": ["empty"]}, None),
        ({"get_param": [{"get_param": "name"}]}, None),  # the name itself from a parameter
    ],
)
def test_get_param(snippet: Any, expected: Any) -> None:
    params = dict(PARAMS, web=None)
    assert evaluate(snippet, parameters=params) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "get_param needs a parameter name"),
        ("", "get_param needs a parameter name"),
        (5, "get_param expects a parameter name or a list"),
        ([{"a": 1}], "get_param expects a parameter name or a list"),
        ({"x": 1}, "get_param expects a parameter name or a list"),
    ],
)
def test_get_param_shapes_are_checked_at_parse_time(args: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message) as caught:
        parse({"get_param": args})
    assert caught.value.file == "stack.yaml" and caught.value.line == 12


def test_get_param_of_an_undefined_parameter_is_the_contexts_error() -> None:
    with pytest.raises(TemplateError, match="the parameter 'nope' is not defined"):
        evaluate({"get_param": "nope"})


def test_get_resource_resolves_to_the_reference_id_and_names_its_dependency() -> None:
    node = parse({"get_resource": "server"})
    assert list(nodes.references(node)) == [Reference("server", None, node.where)]
    ctx = FakeContext(resources={"server": ("i-123", {})})
    assert nodes.resolve(node, ctx) == "i-123"


def test_get_resource_named_by_a_parameter_is_known_after_partial_evaluation() -> None:
    node = parse({"get_resource": {"get_param": "which"}})
    assert [ref.resource for ref in nodes.references(node)] == []
    partial = nodes.partial(node, FakeContext(parameters={"which": "db"}))
    assert isinstance(partial, Function)
    assert [ref.resource for ref in nodes.references(partial)] == ["db"]


@pytest.mark.parametrize("args", [5, ["a"], {"a": 1}, None])
def test_get_resource_needs_a_name(args: Any) -> None:
    with pytest.raises(TemplateError, match="get_resource expects a resource name"):
        parse({"get_resource": args})


RESOURCES = {
    "server": (
        "i-1",
        {"networks": {"private": ["10.0.0.5", "10.0.0.6"]}, "name": "srv", "none": None},
    )
}


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["server", "name"], "srv"),
        (["server", "networks", "private", 1], "10.0.0.6"),
        (["server", "networks", "public", 0], None),  # a path that does not fit gives null
        (["server", "networks", "private", "1"], None),  # get_attr does not parse indexes
        (["server", "none", "x"], None),
        (["server", "unknown"], None),
    ],
)
def test_get_attr_with_paths(args: list[Any], expected: Any) -> None:
    assert evaluate({"get_attr": args}, resources=RESOURCES) == expected


def test_get_attr_whole_resource_form_from_2015_10_15() -> None:
    assert (
        evaluate({"get_attr": ["server"]}, "2015-10-15", resources=RESOURCES)
        == (RESOURCES["server"][1])
    )
    with pytest.raises(TemplateError, match=r"get_attr expects \[resource_name, attribute"):
        parse({"get_attr": ["server"]}, "2015-04-30")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("server", "get_attr expects a list"),
        ([], "get_attr expects"),
        ([5, "name"], "resource name must be a string"),
        (["server", ["a"]], "attribute name must be a string"),
    ],
)
def test_get_attr_shapes_are_checked_at_parse_time(args: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse({"get_attr": args})


@pytest.mark.parametrize(
    ("args", "reference"),
    [
        (["server", "networks", "private"], Reference("server", "networks")),
        (["server"], Reference("server", ALL_ATTRIBUTES)),
        # an attribute chosen by a parameter is not known yet: assume any attribute
        (["server", {"get_param": "which"}], Reference("server", ALL_ATTRIBUTES)),
    ],
)
def test_get_attr_references(args: list[Any], reference: Reference) -> None:
    node = parse({"get_attr": args})
    found = [(ref.resource, ref.attribute) for ref in nodes.references(node)]
    assert found == [(reference.resource, reference.attribute)]


def test_get_attr_stays_a_node_until_resource_data_is_there() -> None:
    node = parse(
        {"str_replace": {"template": "ip=IP", "params": {"IP": {"get_attr": ["s", "ip"]}}}}
    )
    partial = nodes.partial(node, FakeContext())
    assert not nodes.is_static(partial)
    assert [(r.resource, r.attribute) for r in nodes.references(partial)] == [("s", "ip")]
    assert nodes.resolve(partial, FakeContext(resources={"s": ("id", {"ip": "1.2.3.4"})})) == (
        "ip=1.2.3.4"
    )


def test_get_file() -> None:
    assert evaluate({"get_file": "script.sh"}, files={"script.sh": "#!/bin/sh"}) == "#!/bin/sh"
    with pytest.raises(TemplateError, match="no content in files for 'other'"):
        evaluate({"get_file": "other"})
    with pytest.raises(TemplateError, match="get_file expects a file name"):
        parse({"get_file": ["a"]})


def test_resource_facade_needs_a_provider_template() -> None:
    with pytest.raises(TemplateError, match="resource_facade expects one of metadata"):
        parse({"resource_facade": "properties"})
    with pytest.raises(TemplateError, match="only available in a template used as a provider"):
        evaluate({"resource_facade": "metadata"})

    class FacadeContext(FakeContext):
        def resource_facade(self, kind: str, where: object) -> Any:
            return {"kind": kind}

    node = parse({"resource_facade": "update_policy"})
    assert nodes.resolve(node, FacadeContext()) == {"kind": "update_policy"}
