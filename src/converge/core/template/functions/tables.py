"""The function tables of each HOT version: which name means which function, as in Heat."""

from __future__ import annotations

from functools import cache
from types import MappingProxyType

from converge.core.template.functions.cfn import (
    Base64,
    CfnAnd,
    CfnEquals,
    CfnIf,
    CfnNot,
    CfnOr,
    CfnResourceFacade,
    FindInMap,
    GetAtt,
    GetAZs,
    Join,
    MemberListToMap,
    ParamRef,
    Ref,
    Replace,
    Split,
)
from converge.core.template.functions.conditions import And, Equals, If, IfNullable, Not, Or
from converge.core.template.functions.containers import (
    Contains,
    Filter,
    ListConcat,
    ListConcatUnique,
    MapMerge,
    MapReplace,
)
from converge.core.template.functions.legacy import ResourceFacade, Select, rejected
from converge.core.template.functions.references import (
    GetAttr,
    GetAttrAllAttributes,
    GetFile,
    GetParam,
    GetResource,
)
from converge.core.template.functions.repeat import (
    Repeat,
    RepeatWithMaps,
    RepeatWithPermutations,
)
from converge.core.template.functions.strings import (
    Digest,
    ListJoin,
    ListJoinMultiple,
    StrReplace,
    StrReplaceJson,
    StrReplaceStrict,
    StrReplaceVeryStrict,
    StrSplit,
)
from converge.core.template.functions.url import MakeUrl
from converge.core.template.nodes import Function, FunctionTable

# (first version, name, implementation): a later row for the same name replaces an earlier one.
_FUNCTIONS: tuple[tuple[str, str, type[Function]], ...] = (
    ("2013-05-23", "get_param", GetParam),
    ("2013-05-23", "get_resource", GetResource),
    ("2013-05-23", "get_attr", GetAttr),
    ("2013-05-23", "get_file", GetFile),
    ("2013-05-23", "list_join", ListJoin),
    ("2013-05-23", "str_replace", StrReplace),
    ("2013-05-23", "resource_facade", ResourceFacade),
    ("2013-05-23", "Fn::Select", Select),
    # HOT's first version still had these CloudFormation functions (Heat's HOTemplate20130523)
    ("2013-05-23", "Ref", Ref),
    ("2013-05-23", "Fn::GetAZs", GetAZs),
    ("2013-05-23", "Fn::Join", Join),
    ("2013-05-23", "Fn::Split", Split),
    ("2013-05-23", "Fn::Replace", Replace),
    ("2013-05-23", "Fn::Base64", Base64),
    ("2013-05-23", "Fn::MemberListToMap", MemberListToMap),
    ("2013-05-23", "Fn::ResourceFacade", CfnResourceFacade),
    ("2015-04-30", "repeat", Repeat),
    ("2015-04-30", "digest", Digest),
    ("2015-10-15", "get_attr", GetAttrAllAttributes),
    ("2015-10-15", "list_join", ListJoinMultiple),
    ("2015-10-15", "str_replace", StrReplaceJson),
    ("2015-10-15", "str_split", StrSplit),
    ("2016-04-08", "map_merge", MapMerge),
    ("2016-10-14", "repeat", RepeatWithMaps),
    ("2016-10-14", "map_replace", MapReplace),
    ("2016-10-14", "if", If),
    ("2017-02-24", "filter", Filter),
    ("2017-02-24", "str_replace_strict", StrReplaceStrict),
    ("2017-09-01", "repeat", RepeatWithPermutations),
    ("2017-09-01", "make_url", MakeUrl),
    ("2017-09-01", "list_concat", ListConcat),
    ("2017-09-01", "list_concat_unique", ListConcatUnique),
    ("2017-09-01", "str_replace_vstrict", StrReplaceVeryStrict),
    ("2017-09-01", "contains", Contains),
    ("2021-04-16", "if", IfNullable),
)

_CONDITION_FUNCTIONS: tuple[tuple[str, str, type[Function]], ...] = (
    ("2016-10-14", "get_param", GetParam),
    ("2016-10-14", "equals", Equals),
    ("2016-10-14", "not", Not),
    ("2016-10-14", "and", And),
    ("2016-10-14", "or", Or),
    ("2017-09-01", "contains", Contains),
    ("2021-04-16", "if", If),
)

_YAQL = (
    "is not supported by converge: it would need the yaql expression engine; use the other "
    "intrinsic functions (map_merge, repeat, filter, list_concat, ...) instead"
)
_CFN_HINTS = {
    "Ref": "get_resource or get_param",
    "Fn::GetAZs": "a parameter",
    "Fn::Join": "list_join",
    "Fn::Split": "str_split",
    "Fn::Replace": "str_replace",
    "Fn::Base64": "a plain string",
    "Fn::MemberListToMap": "map_merge or repeat",
    "Fn::ResourceFacade": "resource_facade",
}

# Names that are refused with an explanation rather than passed through as plain data
# (Heat's ``Removed``: "The function X is not supported in this version of HOT").
_REJECTED: tuple[tuple[str, str, str], ...] = (
    *(
        (
            "2014-10-16",
            name,
            f"is not supported from heat_template_version 2014-10-16 on; use {hint}",
        )
        for name, hint in _CFN_HINTS.items()
    ),
    (
        "2015-10-15",
        "Fn::Select",
        "is not supported from heat_template_version 2015-10-15 on; use a path in get_attr "
        "or get_param instead",
    ),
    ("2016-10-14", "yaql", _YAQL),
)


def _table(
    date: str, rows: tuple[tuple[str, str, type[Function]], ...]
) -> dict[str, type[Function]]:
    table: dict[str, type[Function]] = {}
    for since, name, implementation in rows:
        if since <= date:
            table[name] = implementation
    return table


def _with_condition_table(
    implementation: type[Function], conditions: FunctionTable
) -> type[Function]:
    """An ``if`` class whose condition argument is parsed with this version's conditions."""
    if not issubclass(implementation, If):
        return implementation
    name = f"{implementation.__name__}WithConditions"
    return type(name, (implementation,), {"condition_functions": conditions})


@cache
def condition_function_table(date: str) -> FunctionTable:
    """The functions allowed in condition expressions for the canonical version ``date``.

    Every other function name of the version is refused there with a message, as in Heat,
    instead of passing through as a plain map.
    """
    table = _table(date, _CONDITION_FUNCTIONS)
    if not table:
        return MappingProxyType({})
    allowed = ", ".join(sorted(table))
    if date >= "2017-09-01":
        table["yaql"] = rejected("yaql", _YAQL)
    for name in _table(date, _FUNCTIONS):
        if name not in table:
            table[name] = rejected(name, f"is not allowed in a condition; use {allowed}")
    conditions = MappingProxyType(table)
    # ``if`` inside a condition (2021-04-16) parses its own condition the same way.
    for name, implementation in list(table.items()):
        table[name] = _with_condition_table(implementation, conditions)
    return conditions


@cache
def function_table(date: str) -> FunctionTable:
    """The functions allowed in resources and outputs for the canonical version ``date``."""
    table = _table(date, _FUNCTIONS)
    for since, name, reason in _REJECTED:
        if since <= date:
            table[name] = rejected(name, reason)
    conditions = condition_function_table(date)
    for name, implementation in list(table.items()):
        table[name] = _with_condition_table(implementation, conditions)
    return MappingProxyType(table)


# The CloudFormation formats (Heat's HeatTemplate and CfnTemplate): keyed by format key.
_CFN_COMMON: tuple[tuple[str, type[Function]], ...] = (
    ("Fn::FindInMap", FindInMap),
    ("Fn::GetAZs", GetAZs),
    ("Ref", Ref),
    ("Fn::GetAtt", GetAtt),
    ("Fn::Select", Select),
    ("Fn::Join", Join),
    ("Fn::Split", Split),
    ("Fn::Replace", Replace),
    ("Fn::Base64", Base64),
    ("Fn::MemberListToMap", MemberListToMap),
    ("Fn::ResourceFacade", CfnResourceFacade),
)
_CFN_CONDITION_FUNCTIONS: tuple[tuple[str, type[Function]], ...] = (
    ("Fn::Equals", CfnEquals),
    ("Ref", ParamRef),
    ("Fn::FindInMap", FindInMap),
    ("Fn::Not", CfnNot),
    ("Fn::And", CfnAnd),
    ("Fn::Or", CfnOr),
)


@cache
def cfn_condition_function_table(with_conditions: bool) -> FunctionTable:
    """The condition functions of a CFN format (none for HeatTemplateFormatVersion);
    the other functions are refused in a condition, as in Heat."""
    if not with_conditions:
        return MappingProxyType({})
    table: dict[str, type[Function]] = dict(_CFN_CONDITION_FUNCTIONS)
    allowed = ", ".join(sorted(table))
    for name, _ in (*_CFN_COMMON, ("Fn::If", CfnIf)):
        if name not in table:
            table[name] = rejected(name, f"is not allowed in a condition; use {allowed}")
    return MappingProxyType(table)


@cache
def cfn_function_table(with_conditions: bool) -> FunctionTable:
    """The functions of a CFN format: AWSTemplateFormatVersion (``with_conditions``) adds
    ``Fn::If``; an ``Fn::If`` in HeatTemplateFormatVersion is plain data, as in Heat."""
    table: dict[str, type[Function]] = dict(_CFN_COMMON)
    if with_conditions:
        conditions = cfn_condition_function_table(True)
        table["Fn::If"] = type("CfnIfWithConditions", (CfnIf,), {"condition_functions": conditions})
    return MappingProxyType(table)
