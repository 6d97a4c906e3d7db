"""A loaded HOT template: its data, version, and the line of every node."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from converge.core.template.loader import DEFAULT_LIMITS, Limits, load_document
from converge.core.template.nodes import EMPTY_SOURCE_MAP, SourceMap, Where
from converge.core.template.versions import HotVersion, canonical_version, hot_version
from converge.errors import TemplateError, TemplateErrors

_MAPPING_SECTIONS = ("parameters", "resources", "outputs", "conditions")


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
        """A mapping section (``parameters``, ``resources``, …); empty when absent."""
        return self.data.get(name) or {}

    @property
    def description(self) -> str:
        return str(self.data.get("description") or "")

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
    if "heat_template_version" not in data:
        raise where.error("missing heat_template_version (e.g. heat_template_version: 2021-04-16)")
    version = hot_version(
        canonical_version(data["heat_template_version"], where.child("heat_template_version"))
    )
    errors: list[TemplateError] = []
    for key in data:
        if key not in version.sections:
            hint = did_you_mean(key, version.sections)
            if not hint and key == "conditions":
                hint = " (conditions need heat_template_version 2016-10-14 or newer)"
            errors.append(where.child(key).error(f"unknown section {key!r}{hint}"))
    for name in _MAPPING_SECTIONS:
        value = data.get(name)
        if value is not None and not isinstance(value, dict):
            errors.append(where.child(name).error(f"{name} must be a mapping"))
    description = data.get("description")
    if description is not None and not isinstance(description, str):
        errors.append(where.child("description").error("description must be a string"))
    groups = data.get("parameter_groups")
    if groups is not None and not isinstance(groups, list):
        errors.append(where.child("parameter_groups").error("parameter_groups must be a list"))
    TemplateErrors.raise_if_any(errors)
    resources = data.get("resources") or {}
    if len(resources) > limits.max_resources:
        raise where.child("resources").error(
            f"{len(resources)} resources, more than the limit of {limits.max_resources}"
        )
    for name in resources:
        if not isinstance(name, str) or not name:
            raise where.child("resources").error(f"resource name {name!r} must be a string")
    return Template(data, filename, source_map, version, limits)
