"""CloudFormation's intrinsic functions, each checked against the Heat behaviour it copies
(heat/engine/cfn/functions.py) and against Heat's rule for which version has which."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from test_functions_fakes import PLACE, FakeContext

from converge.core.template import nodes
from converge.core.template.functions.cfn import AVAILABILITY_ZONES
from converge.core.template.functions.legacy import Rejected
from converge.core.template.nodes import Where
from converge.core.template.versions import AWS_FORMAT, HEAT_CFN_FORMAT, HotVersion, hot_version
from converge.errors import TemplateError


class CfnContext(FakeContext):
    """The fake context plus what CFN functions ask: resource names and Mappings."""

    mappings: Mapping[str, Any] = {
        "Sizes": {"small": {"Length": 8, "Flavor": "m1.small"}, "large": {"Length": 32}}
    }

    def is_resource(self, name: str) -> bool:
        return self.resources is not None and name in self.resources

    def mapping(self, name: str, where: Where) -> Mapping[str, Any]:
        if name not in self.mappings:
            raise where.error(f"Fn::FindInMap: unknown mapping {name!r}")
        return self.mappings[name]


def evaluate(snippet: Any, version: HotVersion = AWS_FORMAT, **context: Any) -> Any:
    ctx = CfnContext(**context)
    if ctx.resources is None:
        ctx.resources = {}
    return nodes.resolve(nodes.parse(snippet, version.functions, PLACE), ctx)


def error_of(snippet: Any, version: HotVersion = AWS_FORMAT, **context: Any) -> str:
    with pytest.raises(TemplateError) as caught:
        evaluate(snippet, version, **context)
    return caught.value.format()


SERVER = {"server": ("server-id", {"address": "10.0.0.5", "networks": {"private": ["a"]}})}


# --- Ref --------------------------------------------------------------------------------


def test_ref_of_a_resource_is_its_reference_id_and_of_a_parameter_its_value() -> None:
    # Heat's Ref: GetResource when the name is a resource of the stack, else ParamRef.
    assert evaluate({"Ref": "server"}, resources=SERVER) == "server-id"
    assert evaluate({"Ref": "size"}, parameters={"size": "small"}, resources=SERVER) == "small"


def test_ref_prefers_the_resource_when_a_parameter_has_the_same_name() -> None:
    both = evaluate({"Ref": "server"}, parameters={"server": "p"}, resources=SERVER)
    assert both == "server-id"


def test_ref_of_neither_names_the_place() -> None:
    message = error_of({"Ref": "nothing"})
    assert message.startswith("stack.yaml:12: resources.server.properties.value: Ref: ")
    assert "'nothing'" in message and "no resource has that name" in message


def test_ref_references_the_resource_so_it_becomes_a_dependency() -> None:
    node = nodes.parse({"Ref": "server"}, AWS_FORMAT.functions, PLACE)
    assert [r.resource for r in nodes.references(node)] == ["server"]


@pytest.mark.parametrize("args", [["a"], {"a": 1}, 3])
def test_ref_needs_a_name(args: Any) -> None:
    assert "Ref expects a resource or parameter name" in error_of({"Ref": args})


# --- Fn::GetAtt ---------------------------------------------------------------------------


def test_getatt_reads_an_attribute() -> None:
    assert evaluate({"Fn::GetAtt": ["server", "address"]}, resources=SERVER) == "10.0.0.5"


@pytest.mark.parametrize("args", [["server"], ["server", "networks", "private"], "server"])
def test_getatt_takes_exactly_resource_and_attribute(args: Any) -> None:
    # Heat's GetAtt: 'Arguments to "Fn::GetAtt" must be of the form [resource_name, attribute]'
    assert "Fn::GetAtt expects a list [resource_name, attribute]" in error_of(
        {"Fn::GetAtt": args}, resources=SERVER
    )


# --- strings ------------------------------------------------------------------------------


def test_join_joins_strings() -> None:
    assert evaluate({"Fn::Join": [", ", ["a", "b", "c"]]}) == "a, b, c"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("a,b", "Fn::Join expects a list [<delimiter>, [<item>, ...]]"),
        ([",", ["a"], ["b"]], "Fn::Join expects a list"),
        ([1, ["a"]], "Fn::Join: the delimiter must be a string"),
        ([",", "ab"], "list_join must operate on lists"),
        ([",", ["a", 3]], "items to join must be strings"),
    ],
)
def test_join_checks_its_arguments(args: Any, message: str) -> None:
    assert message in error_of({"Fn::Join": args})


def test_split_splits() -> None:
    assert evaluate({"Fn::Split": [",", "a,b,,c"]}) == ["a", "b", "", "c"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("a,b", "Fn::Split expects a list like"),
        ({"a": 1}, "Fn::Split expects a list like"),
        ([","], "Fn::Split expects a list like"),
        ([1, "a"], "Fn::Split: the delimiter must be a string"),
        ([",", ["a"]], "Fn::Split can only split a string"),
    ],
)
def test_split_checks_its_arguments(args: Any, message: str) -> None:
    assert message in error_of({"Fn::Split": args})


def test_replace_substitutes_longest_placeholder_first() -> None:
    # Heat's Replace: longer matches first, replaced text is not scanned again.
    snippet = {"Fn::Replace": [{"$var": "X", "$var1": "$var", "%n%": 3}, "$var1 $var %n%"]}
    assert evaluate(snippet) == "$var X 3"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("text", "Fn::Replace expects a list like"),
        ([{"a": "b"}], "Fn::Replace expects a list like"),
        (["a", "text"], "Fn::Replace: the replacements must be a map"),
        ([{"a": "b"}, 3], "Fn::Replace: the text must be a string"),
        ([{"a": ["x"]}, "a"], "the value of 'a' must be a string or a number"),
    ],
)
def test_replace_checks_its_arguments(args: Any, message: str) -> None:
    assert message in error_of({"Fn::Replace": args})


def test_base64_returns_the_string_unchanged_as_heat_does() -> None:
    assert evaluate({"Fn::Base64": "#!/bin/sh\necho hi\n"}) == "#!/bin/sh\necho hi\n"
    assert evaluate({"Fn::Base64": {"Ref": "p"}}, parameters={"p": "x"}) == "x"


def test_base64_refuses_what_is_not_a_string() -> None:
    assert "Fn::Base64 expects a string, not a list" in error_of({"Fn::Base64": ["a"]})
    assert "Fn::Base64 expects a string" in error_of(
        {"Fn::Base64": {"Ref": "p"}}, parameters={"p": 3}
    )


# --- Fn::FindInMap, Fn::GetAZs, Fn::MemberListToMap, Fn::Select, Fn::ResourceFacade ------


def test_find_in_map_reads_the_mappings() -> None:
    assert evaluate({"Fn::FindInMap": ["Sizes", "small", "Length"]}) == 8
    snippet = {"Fn::FindInMap": ["Sizes", {"Ref": "size"}, "Length"]}
    assert evaluate(snippet, parameters={"size": "large"}) == 32


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Sizes", "small"], "Fn::FindInMap expects a list [<mapping name>, <key>, <value name>]"),
        (["Nope", "small", "Length"], "unknown mapping 'Nope'"),
        (["Sizes", "huge", "Length"], "mapping 'Sizes' has no key 'huge' (it has: small, large)"),
        (["Sizes", "large", "Flavor"], "Sizes.large has no value 'Flavor' (it has: Length)"),
    ],
)
def test_find_in_map_says_what_is_missing(args: Any, message: str) -> None:
    assert message in error_of({"Fn::FindInMap": args})


def test_get_azs_gives_novas_default_zone_whatever_the_region() -> None:
    # Heat's GetAZs without a compute service to ask answers ['nova'].
    assert evaluate({"Fn::GetAZs": ""}) == ["nova"] == list(AVAILABILITY_ZONES)
    assert evaluate({"Fn::GetAZs": {"Ref": "AWS::Region"}}, parameters={"AWS::Region": "r"}) == [
        "nova"
    ]


def test_member_list_to_map_pairs_names_and_values() -> None:
    members = [
        ".member.0.Name=key",
        ".member.0.Value=door",
        ".member.1.Name=colour",
        ".member.1.Value=red=ish",
        ".member.2.Name=lonely",
    ]
    result = evaluate({"Fn::MemberListToMap": ["Name", "Value", members]})
    assert result == {"key": "door", "colour": "red=ish"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Name", "Value"], "Fn::MemberListToMap expects a list like"),
        ([1, "Value", []], "the key name must be a string"),
        (["Name", "Value", "x"], "the member list must be a list"),
        (["Name", "Value", [3]], "member list items must be strings"),
    ],
)
def test_member_list_to_map_checks_its_arguments(args: Any, message: str) -> None:
    assert message in error_of({"Fn::MemberListToMap": args})


def test_select_picks_from_a_list_or_a_map() -> None:
    assert evaluate({"Fn::Select": ["1", ["a", "b"]]}) == "b"
    assert evaluate({"Fn::Select": ["k", {"k": "v"}]}) == "v"
    assert evaluate({"Fn::Select": [5, ["a"]]}) == ""
    # Heat's Select: an empty string (a value not available yet) selects ""
    assert evaluate({"Fn::Select": [0, ""]}) == ""
    assert evaluate({"Fn::Select": [0, {"Ref": "p"}]}, parameters={"p": ""}) == ""


def test_resource_facade_names_heat_kinds_and_reads_the_facade() -> None:
    class Facade(CfnContext):
        def resource_facade(self, kind: str, where: Where) -> Any:
            return {"metadata": {"m": 1}, "deletion_policy": "Retain"}[kind]

    ctx = Facade(resources={})
    node = nodes.parse({"Fn::ResourceFacade": "DeletionPolicy"}, AWS_FORMAT.functions, PLACE)
    assert nodes.resolve(node, ctx) == "Retain"
    assert "expects one of Metadata, DeletionPolicy, UpdatePolicy" in error_of(
        {"Fn::ResourceFacade": "metadata"}
    )
    assert "expects one of Metadata" in error_of({"Fn::ResourceFacade": ["Metadata"]})
    assert "only available in a template used as a provider" in error_of(
        {"Fn::ResourceFacade": "Metadata"}
    )


# --- Fn::If and the conditions -----------------------------------------------------------


def test_if_picks_a_branch_by_a_named_condition() -> None:
    snippet = {"Fn::If": ["big", "large", "small"]}
    assert evaluate(snippet, conditions={"big": True}) == "large"
    assert evaluate(snippet, conditions={"big": False}) == "small"


def test_if_takes_an_inline_condition_where_ref_names_a_parameter() -> None:
    snippet = {"Fn::If": [{"Fn::Equals": [{"Ref": "size"}, "big"]}, 1, 2]}
    assert evaluate(snippet, parameters={"size": "big"}) == 1
    # in a condition Ref is Heat's ParamRef: a resource of that name is not looked at
    params = {"server": "big"}
    snippet = {"Fn::If": [{"Fn::Equals": [{"Ref": "server"}, "big"]}, 1, 2]}
    assert evaluate(snippet, parameters=params, resources=SERVER) == 1


@pytest.mark.parametrize("args", [["c", 1], ["c", 1, 2, 3], "c"])
def test_if_takes_three_arguments(args: Any) -> None:
    message = "Fn::If expects a list [<condition name>, <value_if_true>, <value_if_false>]"
    assert message in error_of({"Fn::If": args}, conditions={"c": True})


def condition(snippet: Any, **context: Any) -> Any:
    ctx = CfnContext(**context)
    return nodes.resolve(nodes.parse(snippet, AWS_FORMAT.condition_functions, PLACE), ctx)


def test_condition_functions() -> None:
    params = {"env": "prod", "zone": "a"}
    assert condition({"Fn::Equals": [{"Ref": "env"}, "prod"]}, parameters=params) is True
    assert condition({"Fn::Not": [{"Fn::Equals": ["a", "b"]}]}) is True
    assert condition({"Fn::Not": ["on"]}, conditions={"on": True}) is False
    assert condition({"Fn::And": ["on", {"Fn::Equals": [1, 1]}]}, conditions={"on": True})
    assert condition({"Fn::Or": ["off", False]}, conditions={"off": False}) is False
    assert condition({"Fn::Equals": [{"Fn::FindInMap": ["Sizes", "small", "Length"]}, 8]})


@pytest.mark.parametrize(
    ("snippet", "message"),
    [
        ({"Fn::Not": "on"}, "Fn::Not expects a list of one condition"),
        ({"Fn::Not": ["a", "b"]}, "Fn::Not expects a list of one condition"),
        ({"Fn::Equals": ["a"]}, "Fn::Equals expects a list of two values"),
        ({"Fn::And": ["a"]}, "Fn::And expects a list of at least two conditions"),
        ({"Fn::Or": "a"}, "Fn::Or expects a list of at least two conditions"),
        ({"Fn::Join": [",", ["a"]]}, "Fn::Join is not allowed in a condition; use Fn::And"),
        ({"Fn::Equals": [{"Fn::GetAtt": ["s", "a"]}, 1]}, "Fn::GetAtt is not allowed"),
    ],
)
def test_condition_functions_check_their_arguments(snippet: Any, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        condition(snippet, conditions={"on": True})


def test_ref_in_a_condition_reads_only_parameters() -> None:
    # Heat's condition table maps Ref to ParamRef: a resource is no parameter.
    with pytest.raises(TemplateError, match="the parameter 'server' is not defined"):
        condition({"Fn::Equals": [{"Ref": "server"}, "x"]}, resources=SERVER)


# --- which version has which function (Heat's function tables) ----------------------------

CFN_FUNCTIONS = {
    "Fn::FindInMap",
    "Fn::GetAZs",
    "Ref",
    "Fn::GetAtt",
    "Fn::Select",
    "Fn::Join",
    "Fn::Split",
    "Fn::Replace",
    "Fn::Base64",
    "Fn::MemberListToMap",
    "Fn::ResourceFacade",
}


def test_function_tables_of_the_cfn_formats() -> None:
    # Heat's HeatTemplate (2012-12-12) and CfnTemplate (2010-09-09, which adds Fn::If).
    assert set(HEAT_CFN_FORMAT.functions) == CFN_FUNCTIONS
    assert set(AWS_FORMAT.functions) == CFN_FUNCTIONS | {"Fn::If"}
    usable = {
        name
        for name, implementation in AWS_FORMAT.condition_functions.items()
        if not issubclass(implementation, Rejected)
    }
    assert usable == {"Fn::Equals", "Ref", "Fn::FindInMap", "Fn::Not", "Fn::And", "Fn::Or"}
    assert dict(HEAT_CFN_FORMAT.condition_functions) == {}


def test_unknown_one_key_maps_are_data_as_in_heat() -> None:
    # No such function in the version: the map is plain data, not an error.
    assert evaluate({"Fn::If": ["c", 1, 2]}, HEAT_CFN_FORMAT) == {"Fn::If": ["c", 1, 2]}
    assert evaluate({"Fn::Sub": "x"}) == {"Fn::Sub": "x"}
    assert evaluate({"get_param": "x"}) == {"get_param": "x"}


def test_hot_2013_05_23_still_has_the_cfn_functions_and_later_versions_refuse_them() -> None:
    # Heat's HOTemplate20130523 has Ref, Fn::Join, …; HOTemplate20141016 maps them to Removed.
    old = hot_version("2013-05-23")
    ctx = CfnContext(parameters={"p": "v"}, resources=SERVER)
    snippet = {"Fn::Join": ["-", [{"Ref": "p"}, {"Ref": "server"}, {"Fn::Base64": "b"}]]}
    parsed = nodes.parse(snippet, old.functions, PLACE)
    assert nodes.resolve(parsed, ctx) == "v-server-id-b"
    with pytest.raises(
        TemplateError, match="Ref is not supported from heat_template_version 2014-10-16"
    ):
        nodes.parse(snippet, hot_version("2014-10-16").functions, PLACE)
