"""A loaded template (HOT or CFN): its data, version, and the line of every node."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from converge.core.template.loader import DEFAULT_LIMITS, Limits, load_document
from converge.core.template.nodes import EMPTY_SOURCE_MAP, SourceMap, Where
from converge.core.template.versions import (
    CFN_VERSIONS,
    VERSION_KEYS,
    HotVersion,
    canonical_version,
    cfn_version,
    hot_version,
)
from converge.errors import TemplateError, TemplateErrors

_MAPPING_SECTIONS = ("parameters", "resources", "outputs", "conditions", "mappings")


def did_you_mean(word: object, choices: Any) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices``, or ``""``."""
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [c for c in choices if isinstance(c, str)], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


@dataclass(frozen=True)
class Template:
    """A parsed template whose top level has been checked against its version."""

    data: Mapping[str, Any] = field(repr=False)
    filename: str
    source_map: SourceMap = field(repr=False, compare=False)
    version: HotVersion
    limits: Limits = field(default=DEFAULT_LIMITS, repr=False, compare=False)
    # accepted as Heat accepts them, worth telling the author (a repeated key)
    warnings: tuple[TemplateError, ...] = field(default=(), repr=False, compare=False)

    @property
    def where(self) -> Where:
        return Where(self.filename, (), self.source_map)

    def section(self, name: str) -> Mapping[str, Any]:
        """A mapping section by HOT's name (``parameters``, ``resources``, …; a CFN
        template's ``Parameters``, ``Resources``, …); empty when absent."""
        return self.data.get(self.version.key(name)) or {}

    def section_where(self, name: str) -> Where:
        """The place of a section, spelt as the template spells it."""
        return self.where.child(self.version.key(name))

    @property
    def description(self) -> str:
        return str(self.data.get(self.version.key("description")) or "")

    @property
    def mappings(self) -> Mapping[str, Any]:
        """A CFN template's ``Mappings`` (``Fn::FindInMap`` reads them); HOT has none."""
        return self.section("mappings") if self.version.is_cfn else {}

    @property
    def parameters(self) -> Mapping[str, Any]:
        return self.section("parameters")

    @property
    def resources(self) -> Mapping[str, Any]:
        return self.section("resources")

    @property
    def outputs(self) -> Mapping[str, Any]:
        return self.section("outputs")

    @property
    def conditions(self) -> Mapping[str, Any]:
        return self.section("conditions")


def load_template(
    source: str | bytes,
    filename: str = "<template>",
    *,
    limits: Limits = DEFAULT_LIMITS,
    strict: bool = False,
) -> Template:
    """Parse a HOT template (YAML or JSON) and check its top-level sections.

    Raises ``TemplateError`` (or ``TemplateErrors``) naming the file and line. A repeated
    mapping key is one of the template's ``warnings`` (the last one wins, as in Heat), or
    an error when ``strict``.
    """
    warnings: list[TemplateError] = []
    data, source_map = load_document(
        source, filename, limits=limits, strict=strict, warnings=warnings
    )
    template = _template(data, filename, source_map, limits)
    return replace(template, warnings=tuple(warnings)) if warnings else template


def template_from_data(
    data: Any, filename: str = "<template>", *, limits: Limits = DEFAULT_LIMITS
) -> Template:
    """A template from already-parsed data (a stored template, a JSON request body)."""
    return _template(data, filename, EMPTY_SOURCE_MAP, limits)


def _template(data: Any, filename: str, source_map: SourceMap, limits: Limits) -> Template:
    where = Where(filename, (), source_map)
    if not isinstance(data, dict):
        raise where.error(
            "a template must be a mapping with heat_template_version, resources, … at its top"
        )
    version = _version(data, where)
    errors: list[TemplateError] = []
    for key in data:
        if key not in version.sections:
            hint = did_you_mean(key, version.sections)
            if not hint and key == "conditions":
                hint = " (conditions need heat_template_version 2016-10-14 or newer)"
            if not hint and key == "Conditions":
                hint = " (Conditions need AWSTemplateFormatVersion 2010-09-09)"
            errors.append(where.child(key).error(f"unknown section {key!r}{hint}"))
    for name in (version.key(section) for section in _MAPPING_SECTIONS):
        value = data.get(name)
        if name in version.sections and value is not None and not isinstance(value, dict):
            errors.append(where.child(name).error(f"{name} must be a mapping"))
    description_key = version.key("description")
    description = data.get(description_key)
    if description is not None and not isinstance(description, str):
        errors.append(where.child(description_key).error(f"{description_key} must be a string"))
    groups = data.get("parameter_groups")
    if groups is not None and not isinstance(groups, list):
        errors.append(where.child("parameter_groups").error("parameter_groups must be a list"))
    TemplateErrors.raise_if_any(errors)
    section = version.key("resources")
    resources = data.get(section) or {}
    if len(resources) > limits.max_resources:
        raise where.child(section).error(
            f"{len(resources)} resources, more than the limit of {limits.max_resources}"
        )
    for name in resources:
        if not isinstance(name, str) or not name:
            raise where.child(section).error(f"resource name {name!r} must be a string")
    return Template(data, filename, source_map, version, limits)


def _version(data: Mapping[str, Any], where: Where) -> HotVersion:
    """The version a template names: one of the version keys, as Heat's ``get_version``."""
    present = [key for key in VERSION_KEYS if key in data]
    if len(present) > 1:
        raise where.error(f"ambiguous template versions: {', '.join(present)}; keep one")
    if not present:
        raise where.error(
            "missing heat_template_version (e.g. heat_template_version: 2021-04-16; "
            "a CloudFormation template has AWSTemplateFormatVersion: '2010-09-09')"
        )
    key = present[0]
    if key in CFN_VERSIONS:
        return cfn_version(key, data[key], where.child(key))
    return hot_version(canonical_version(data[key], where.child(key)))
