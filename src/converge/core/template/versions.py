"""The template versions: what each allows (sections, keys, functions) and their names.

Every HOT ``heat_template_version``, and the two CloudFormation formats Heat reads
(``AWSTemplateFormatVersion: 2010-09-09`` and ``HeatTemplateFormatVersion: 2012-12-12``).
A CFN template is read by the same code: its version's ``names`` say how each section
and key is spelt (``resources`` is ``Resources``, ``depends_on`` is ``DependsOn``).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from converge.core.template.functions.tables import (
    cfn_condition_function_table,
    cfn_function_table,
    condition_function_table,
    function_table,
)
from converge.core.template.nodes import FunctionTable, Where

# (date, release name): Heat accepts the release name as the version from newton on.
_RELEASES: tuple[tuple[str, str | None], ...] = (
    ("2013-05-23", None),
    ("2014-10-16", None),
    ("2015-04-30", None),
    ("2015-10-15", None),
    ("2016-04-08", None),
    ("2016-10-14", "newton"),
    ("2017-02-24", "ocata"),
    ("2017-09-01", "pike"),
    ("2018-03-02", "queens"),
    ("2018-08-31", "rocky"),
    ("2021-04-16", "wallaby"),
)

CONDITIONS_SINCE = "2016-10-14"
PARAMETER_TAGS_SINCE = "2018-03-02"
MODULO_CONSTRAINT_SINCE = "2017-02-24"

_BASE_SECTIONS = frozenset(
    {
        "heat_template_version",
        "description",
        "parameter_groups",
        "parameters",
        "resources",
        "outputs",
    }
)
_BASE_RESOURCE_KEYS = frozenset(
    {
        "type",
        "properties",
        "metadata",
        "depends_on",
        "deletion_policy",
        "update_policy",
        "description",
    }
)
_BASE_OUTPUT_KEYS = frozenset({"description", "value"})
_BASE_PARAMETER_KEYS = frozenset(
    {"type", "label", "description", "default", "hidden", "constraints", "immutable"}
)
_BASE_CONSTRAINTS = frozenset(
    {"length", "range", "allowed_values", "allowed_pattern", "custom_constraint"}
)

DELETION_POLICIES = ("Delete", "Retain", "Snapshot")


@dataclass(frozen=True)
class HotVersion:
    """One ``heat_template_version``: what a template of this version may contain."""

    date: str  # the canonical form, e.g. "2016-10-14"
    name: str | None  # the release name accepted instead of the date (newton on), else None
    sections: frozenset[str]  # allowed top-level sections
    resource_keys: frozenset[str]  # allowed keys inside a resource definition
    output_keys: frozenset[str]  # allowed keys inside an output definition
    parameter_keys: frozenset[str]  # allowed keys inside a parameter definition
    parameter_constraints: frozenset[str]  # allowed constraint kinds of a parameter
    functions: FunctionTable = field(repr=False, compare=False)  # for resources and outputs
    condition_functions: FunctionTable = field(
        repr=False, compare=False
    )  # for condition expressions
    supports_conditions: bool
    deletion_policies: Mapping[str, str] = field(
        repr=False, compare=False
    )  # as written -> canonical
    version_key: str = "heat_template_version"  # the top-level key that names the version
    # HOT's name of a section or key -> how this format spells it (CFN: ``Resources``)
    names: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_cfn(self) -> bool:
        return self.version_key != "heat_template_version"

    def key(self, name: str) -> str:
        """How this version spells HOT's section or key ``name``."""
        return self.names.get(name, name)

    def at_least(self, date: str) -> bool:
        """True when this version is ``date`` or newer (ISO dates compare as strings)."""
        return self.date >= date

    def __str__(self) -> str:
        return self.date


def _build(date: str, name: str | None) -> HotVersion:
    conditions = date >= CONDITIONS_SINCE
    policies = {policy: policy for policy in DELETION_POLICIES}
    if conditions:  # lower-case aliases came with newton
        policies.update({policy.lower(): policy for policy in DELETION_POLICIES})
    return HotVersion(
        date=date,
        name=name,
        sections=_BASE_SECTIONS | ({"conditions"} if conditions else set()),
        resource_keys=_BASE_RESOURCE_KEYS | ({"external_id", "condition"} if conditions else set()),
        output_keys=_BASE_OUTPUT_KEYS | ({"condition"} if conditions else set()),
        parameter_keys=_BASE_PARAMETER_KEYS | ({"tags"} if date >= PARAMETER_TAGS_SINCE else set()),
        parameter_constraints=_BASE_CONSTRAINTS
        | ({"modulo"} if date >= MODULO_CONSTRAINT_SINCE else set()),
        functions=MappingProxyType(dict(function_table(date))),
        condition_functions=MappingProxyType(dict(condition_function_table(date))),
        supports_conditions=conditions,
        deletion_policies=MappingProxyType(policies),
    )


# Both CFN formats: HOT's name -> the CFN spelling (Heat's CfnTemplateBase)
_CFN_NAMES: Mapping[str, str] = MappingProxyType(
    {
        "description": "Description",
        "parameters": "Parameters",
        "mappings": "Mappings",
        "resources": "Resources",
        "outputs": "Outputs",
        "conditions": "Conditions",
        "type": "Type",
        "properties": "Properties",
        "metadata": "Metadata",
        "depends_on": "DependsOn",
        "deletion_policy": "DeletionPolicy",
        "update_policy": "UpdatePolicy",
        "condition": "Condition",
        "value": "Value",
    }
)
CFN_PARAMETER_KEYS = frozenset(
    {
        "Type",
        "Default",
        "NoEcho",
        "AllowedValues",
        "AllowedPattern",
        "MaxLength",
        "MinLength",
        "MaxValue",
        "MinValue",
        "Description",
        "ConstraintDescription",
        "Label",
    }
)


def _build_cfn(version_key: str, date: str, with_conditions: bool) -> HotVersion:
    """Heat's CfnTemplate (AWS, with ``Conditions``) or HeatTemplate (without)."""
    extra = {"conditions"} if with_conditions else set()
    return HotVersion(
        date=date,
        name=None,
        sections=frozenset(
            _CFN_NAMES[s]
            for s in ("description", "mappings", "parameters", "resources", "outputs", *extra)
        )
        | {version_key},
        resource_keys=frozenset(
            _CFN_NAMES[k]
            for k in (
                "type",
                "properties",
                "metadata",
                "depends_on",
                "deletion_policy",
                "update_policy",
                "description",
                *(["condition"] if with_conditions else []),
            )
        ),
        output_keys=frozenset(
            _CFN_NAMES[k]
            for k in ("description", "value", *(["condition"] if with_conditions else []))
        ),
        parameter_keys=CFN_PARAMETER_KEYS,
        parameter_constraints=frozenset({"length", "range", "allowed_values", "allowed_pattern"}),
        functions=cfn_function_table(with_conditions),
        condition_functions=cfn_condition_function_table(with_conditions),
        supports_conditions=with_conditions,
        deletion_policies=MappingProxyType({policy: policy for policy in DELETION_POLICIES}),
        version_key=version_key,
        names=_CFN_NAMES,
    )


AWS_FORMAT = _build_cfn("AWSTemplateFormatVersion", "2010-09-09", with_conditions=True)
HEAT_CFN_FORMAT = _build_cfn("HeatTemplateFormatVersion", "2012-12-12", with_conditions=False)
CFN_VERSIONS: Mapping[str, HotVersion] = {
    version.version_key: version for version in (AWS_FORMAT, HEAT_CFN_FORMAT)
}
VERSION_KEYS = ("heat_template_version", *CFN_VERSIONS)

VERSIONS: tuple[HotVersion, ...] = tuple(_build(date, name) for date, name in _RELEASES)
LATEST: HotVersion = VERSIONS[-1]
_BY_DATE: Mapping[str, HotVersion] = {version.date: version for version in VERSIONS}
_BY_NAME: Mapping[str, HotVersion] = {
    version.name: version for version in VERSIONS if version.name is not None
}


def _valid_values() -> str:
    return ", ".join(
        version.date + (f" ({version.name})" if version.name else "") for version in VERSIONS
    )


def canonical_version(value: object, where: Where) -> str:
    """The canonical date of a ``heat_template_version`` value (a date, its text, or a name)."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        text = value.isoformat()
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise where.error(
            f"heat_template_version must be a date or a release name, not {value!r}; "
            f"valid versions: {_valid_values()}"
        )
    version = _BY_DATE.get(text) or _BY_NAME.get(text)
    if version is None:
        raise where.error(
            f"unknown heat_template_version {text!r}; valid versions: {_valid_values()}"
        )
    return version.date


def hot_version(canonical: str) -> HotVersion:
    """The version for a canonical date (or a release name); ``KeyError`` for anything else."""
    version = _BY_DATE.get(canonical) or _BY_NAME.get(canonical)
    if version is None:
        raise KeyError(f"unknown heat_template_version {canonical!r}")
    return version


def cfn_version(key: str, value: object, where: Where) -> HotVersion:
    """The CFN format named by ``key`` (``AWSTemplateFormatVersion`` …) and its ``value``."""
    version = CFN_VERSIONS[key]
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        value = value.isoformat()
    if value != version.date:
        raise where.error(f"unknown {key} {value!r}; the valid version is {version.date}")
    return version


def normalize_deletion_policy(value: object, version: HotVersion, where: Where) -> str:
    """``Delete`` / ``Retain`` / ``Snapshot`` from what the template wrote (aliases per version)."""
    if isinstance(value, str) and value in version.deletion_policies:
        return version.deletion_policies[value]
    allowed = ", ".join(version.deletion_policies)
    raise where.error(
        f"invalid {version.key('deletion_policy')} {value!r}; expected one of: {allowed}"
    )
