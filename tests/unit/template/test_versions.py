"""HOT versions: accepted values, sections and keys, and the function tables per version."""

from __future__ import annotations

import datetime

import pytest
from test_functions_fakes import PLACE

from converge.core.template.functions.legacy import Rejected
from converge.core.template.versions import (
    LATEST,
    VERSIONS,
    canonical_version,
    hot_version,
    normalize_deletion_policy,
)
from converge.errors import TemplateError

DATES = [
    "2013-05-23",
    "2014-10-16",
    "2015-04-30",
    "2015-10-15",
    "2016-04-08",
    "2016-10-14",
    "2017-02-24",
    "2017-09-01",
    "2018-03-02",
    "2018-08-31",
    "2021-04-16",
]
NAMES = {
    "newton": "2016-10-14",
    "ocata": "2017-02-24",
    "pike": "2017-09-01",
    "queens": "2018-03-02",
    "rocky": "2018-08-31",
    "wallaby": "2021-04-16",
}


def test_every_heat_version_is_known_in_order() -> None:
    assert [version.date for version in VERSIONS] == DATES
    assert LATEST.date == "2021-04-16"


@pytest.mark.parametrize("date", DATES)
def test_canonical_version_accepts_the_date_as_text_or_yaml_date(date: str) -> None:
    assert canonical_version(date, PLACE) == date
    assert canonical_version(datetime.date.fromisoformat(date), PLACE) == date
    assert hot_version(date).date == date


@pytest.mark.parametrize(("name", "date"), NAMES.items())
def test_canonical_version_accepts_release_names(name: str, date: str) -> None:
    assert canonical_version(name, PLACE) == date
    assert hot_version(name).name == name


@pytest.mark.parametrize("value", ["2019-01-01", "mitaka", "Newton", "", "2016-10-14x"])
def test_unknown_versions_are_refused_listing_the_valid_ones(value: str) -> None:
    with pytest.raises(TemplateError) as caught:
        canonical_version(value, PLACE)
    message = str(caught.value)
    assert message.startswith("stack.yaml:12: resources.server.properties.value: ")
    assert f"unknown heat_template_version {value!r}" in message
    assert "2013-05-23" in message and "2021-04-16 (wallaby)" in message


@pytest.mark.parametrize("value", [20161014, None, ["2016-10-14"], datetime.datetime(2016, 10, 14)])
def test_non_text_versions_are_refused(value: object) -> None:
    with pytest.raises(TemplateError, match="must be a date or a release name"):
        canonical_version(value, PLACE)


def test_hot_version_of_an_unknown_value_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        hot_version("2020-01-01")


@pytest.mark.parametrize("date", DATES)
def test_sections_and_keys_follow_conditions_support(date: str) -> None:
    version = hot_version(date)
    newton = date >= "2016-10-14"
    assert version.supports_conditions is newton
    assert ("conditions" in version.sections) is newton
    assert {"heat_template_version", "resources", "parameters", "outputs"} <= version.sections
    assert {"description", "parameter_groups"} <= version.sections
    assert ("condition" in version.resource_keys) is newton
    assert ("external_id" in version.resource_keys) is newton
    assert ("condition" in version.output_keys) is newton
    assert {"type", "properties", "depends_on", "deletion_policy"} <= version.resource_keys
    assert {"update_policy", "metadata", "description"} <= version.resource_keys
    assert {"value", "description"} <= version.output_keys


@pytest.mark.parametrize("date", DATES)
def test_parameter_keys_and_constraints(date: str) -> None:
    version = hot_version(date)
    assert ("tags" in version.parameter_keys) is (date >= "2018-03-02")
    assert ("modulo" in version.parameter_constraints) is (date >= "2017-02-24")
    assert {"type", "default", "hidden", "constraints", "immutable"} <= version.parameter_keys
    assert "allowed_pattern" in version.parameter_constraints


# name -> (first version it works in, first version it is refused in, or None)
FUNCTION_LIFETIMES = {
    "get_param": ("2013-05-23", None),
    "get_resource": ("2013-05-23", None),
    "get_attr": ("2013-05-23", None),
    "get_file": ("2013-05-23", None),
    "list_join": ("2013-05-23", None),
    "str_replace": ("2013-05-23", None),
    "resource_facade": ("2013-05-23", None),
    "Fn::Select": ("2013-05-23", "2015-10-15"),
    "repeat": ("2015-04-30", None),
    "digest": ("2015-04-30", None),
    "str_split": ("2015-10-15", None),
    "map_merge": ("2016-04-08", None),
    "map_replace": ("2016-10-14", None),
    "if": ("2016-10-14", None),
    "filter": ("2017-02-24", None),
    "str_replace_strict": ("2017-02-24", None),
    "make_url": ("2017-09-01", None),
    "list_concat": ("2017-09-01", None),
    "list_concat_unique": ("2017-09-01", None),
    "str_replace_vstrict": ("2017-09-01", None),
    "contains": ("2017-09-01", None),
}


@pytest.mark.parametrize("date", DATES)
@pytest.mark.parametrize("name", FUNCTION_LIFETIMES)
def test_function_tables_follow_heat(date: str, name: str) -> None:
    since, refused_from = FUNCTION_LIFETIMES[name]
    table = hot_version(date).functions
    if date < since:
        assert name not in table
    elif refused_from and date >= refused_from:
        assert issubclass(table[name], Rejected)
    else:
        assert name in table and not issubclass(table[name], Rejected)


CFN_IN_HOT = [
    "Ref",
    "Fn::GetAZs",
    "Fn::Join",
    "Fn::Split",
    "Fn::Replace",
    "Fn::Base64",
    "Fn::MemberListToMap",
    "Fn::ResourceFacade",
]


@pytest.mark.parametrize("date", DATES)
@pytest.mark.parametrize("name", [*CFN_IN_HOT, "yaql"])
def test_cloudformation_functions_and_yaql_are_refused_not_passed_through(
    date: str, name: str
) -> None:
    # Heat's HOTemplate20130523 still has the CloudFormation functions; HOTemplate20141016
    # and later map each to hot_funcs.Removed (refused, not plain data).
    table = hot_version(date).functions
    if name == "yaql" and date < "2016-10-14":
        assert name not in table
    elif name != "yaql" and date == "2013-05-23":
        assert not issubclass(table[name], Rejected)
    else:
        assert issubclass(table[name], Rejected)


CONDITION_FUNCTIONS = {
    "2016-10-14": {"get_param", "equals", "not", "and", "or"},
    "2017-02-24": {"get_param", "equals", "not", "and", "or"},
    "2017-09-01": {"get_param", "equals", "not", "and", "or", "contains"},
    "2018-03-02": {"get_param", "equals", "not", "and", "or", "contains"},
    "2018-08-31": {"get_param", "equals", "not", "and", "or", "contains"},
    "2021-04-16": {"get_param", "equals", "not", "and", "or", "contains", "if"},
}


@pytest.mark.parametrize("date", DATES)
def test_condition_function_tables(date: str) -> None:
    table = hot_version(date).condition_functions
    usable = {name for name, impl in table.items() if not issubclass(impl, Rejected)}
    assert usable == CONDITION_FUNCTIONS.get(date, set())
    if date >= "2016-10-14":
        # resource functions are refused in conditions instead of passing as plain maps
        assert issubclass(table["get_attr"], Rejected)
        assert issubclass(table["get_resource"], Rejected)


def test_deletion_policy_aliases_came_with_newton() -> None:
    old, new = hot_version("2016-04-08"), hot_version("newton")
    for policy in ("Delete", "Retain", "Snapshot"):
        assert normalize_deletion_policy(policy, old, PLACE) == policy
        assert normalize_deletion_policy(policy.lower(), new, PLACE) == policy
    with pytest.raises(TemplateError, match="invalid deletion_policy 'retain'"):
        normalize_deletion_policy("retain", old, PLACE)
    with pytest.raises(TemplateError, match="expected one of: Delete, Retain, Snapshot, delete"):
        normalize_deletion_policy("Keep", new, PLACE)
    with pytest.raises(TemplateError):
        normalize_deletion_policy(None, new, PLACE)


def test_at_least_compares_versions() -> None:
    assert hot_version("pike").at_least("2016-10-14")
    assert not hot_version("2015-10-15").at_least("2016-10-14")
    assert str(hot_version("ocata")) == "2017-02-24"


def test_versions_are_hashable_values() -> None:
    assert len(set(VERSIONS)) == len(DATES)
    assert hot_version("newton") == hot_version("2016-10-14")
    assert "functions" not in repr(LATEST)
