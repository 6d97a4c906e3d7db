"""Environments: parameter values, parameter defaults and the resource registry.

The registry maps type names to other types (``"My::Type": OS::Heat::None``), by prefix
(``"OS::Nova::*": "My::*"``), or to provider templates (``"My::Server": server.yaml``, read
from the files map), and holds per-resource entries (``resources: {name: {hooks: …}}``,
names may end in ``*``) with hooks, restricted actions and resource-specific mappings.
Several environments merge in order, the later winning entry by entry, as in Heat; a
mapping to ``null`` removes an earlier one. Parameter values also keep each file's own
(``parameter_layers``): a file's ``parameter_merge_strategies`` can only be applied once the
template says each parameter's type (``parameter_merge.py``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from converge.core.template.loader import DEFAULT_LIMITS, Limits, load_document
from converge.core.template.nodes import EMPTY_SOURCE_MAP, SourceMap, Where
from converge.core.template.parameter_layers import (
    STRATEGIES_SECTION,
    ParameterLayer,
    read_merge_strategies,
)
from converge.core.template.template import did_you_mean
from converge.errors import TemplateError, TemplateErrors

SECTIONS = (
    "parameters",
    "parameter_defaults",
    "resource_registry",
    "event_sinks",
    "encrypted_param_names",
    STRATEGIES_SECTION,
)
LAYERS_SECTION = "parameter_layers"  # written by ``to_data`` only, never by hand
_LAYER_KEYS = ("file", "parameters", "parameter_defaults", STRATEGIES_SECTION)
HOOK_TYPES = ("pre-create", "pre-update", "pre-delete", "post-create", "post-update", "post-delete")
RESTRICTED_ACTIONS = ("update", "replace")
_TEMPLATE_SUFFIXES = (".yaml", ".yml", ".template", ".json")
_MAX_CHAIN = 50


def is_provider_template(type_name: str) -> bool:
    """Whether a registry target names a template file rather than a resource type."""
    return type_name.endswith(_TEMPLATE_SUFFIXES)


@dataclass(frozen=True)
class ResourceEntry:
    """``resource_registry.resources.<name>``: what applies to resources matching a name."""

    hooks: tuple[str, ...] | None = None  # None: not set here (merging keeps the earlier)
    restricted_actions: tuple[str, ...] | None = None
    types: Mapping[str, str | None] = field(default_factory=dict)  # resource-specific mappings
    nested: Mapping[str, Any] = field(default_factory=dict)  # entries for a nested stack

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {**self.types, **self.nested}
        if self.hooks is not None:
            data["hooks"] = list(self.hooks)
        if self.restricted_actions is not None:
            data["restricted_actions"] = list(self.restricted_actions)
        return data

    def merged(self, later: ResourceEntry) -> ResourceEntry:
        return ResourceEntry(
            hooks=later.hooks if later.hooks is not None else self.hooks,
            restricted_actions=(
                later.restricted_actions
                if later.restricted_actions is not None
                else self.restricted_actions
            ),
            types={**self.types, **later.types},
            nested={**self.nested, **later.nested},
        )


@dataclass(frozen=True)
class Environment:
    """One environment file, or the merge of several."""

    filename: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    parameter_defaults: Mapping[str, Any] = field(default_factory=dict)
    types: Mapping[str, str | None] = field(default_factory=dict)  # keys may end in "*"
    resources: Mapping[str, ResourceEntry] = field(default_factory=dict)
    base_url: str | None = None
    event_sinks: tuple[Any, ...] = ()
    encrypted_param_names: tuple[str, ...] = ()
    parameter_merge_strategies: Mapping[str, str] = field(default_factory=dict)
    # each merged file's parameter sections, in order; empty for a single file
    parameter_layers: tuple[ParameterLayer, ...] = ()
    notes: tuple[str, ...] = ()  # things accepted but without effect here
    source_map: SourceMap = field(default=EMPTY_SOURCE_MAP, repr=False, compare=False)
    # where each parameter value was written, for messages (merged environments keep this)
    origins: Mapping[str, Where] = field(default_factory=dict, repr=False, compare=False)

    @property
    def where(self) -> Where:
        return Where(self.filename, (), self.source_map)

    @property
    def layers(self) -> tuple[ParameterLayer, ...]:
        """The parameter sections of every file merged into this one, in order."""
        if self.parameter_layers:
            return self.parameter_layers
        own = ParameterLayer(
            self.filename,
            self.parameters,
            self.parameter_defaults,
            self.parameter_merge_strategies,
            self.source_map,
        )
        return () if own.is_empty() else (own,)

    @property
    def has_merge_strategies(self) -> bool:
        """Whether values must be merged by type: several files, one with strategies."""
        return any(layer.strategies for layer in self.parameter_layers)

    def _entries_for(self, resource_name: str | None) -> list[ResourceEntry]:
        if resource_name is None or not self.resources:
            return []  # the usual case, asked three times per resource: keep it quick
        return [
            entry
            for pattern, entry in self.resources.items()
            if pattern == resource_name or fnmatch.fnmatchcase(resource_name, pattern)
        ]

    def hooks_for(self, resource_name: str) -> frozenset[str]:
        hooks: set[str] = set()
        for entry in self._entries_for(resource_name):
            hooks.update(entry.hooks or ())
        return frozenset(hooks)

    def restricted_actions_for(self, resource_name: str) -> frozenset[str]:
        actions: set[str] = set()
        for entry in self._entries_for(resource_name):
            actions.update(entry.restricted_actions or ())
        return frozenset(actions)

    def _map_once(self, type_name: str, resource_name: str | None) -> str | None:
        for entry in self._entries_for(resource_name):
            target = entry.types.get(type_name)
            if target is not None:
                return target
        # Heat tries every matching entry in the order of their names as strings, so a
        # wildcard comes before an exact name it covers ("*" sorts before letters and
        # ":"), and "OS::*" before "OS::Nova::*".
        best: tuple[str, str] | None = None
        target = self.types.get(type_name)
        if target is not None:
            best = (type_name, target)
        for pattern, value in self.types.items():
            if value is None or not pattern.endswith("*") or value == type_name:
                continue  # value == type_name: "OS::*": OS::Heat::None must not map itself
            prefix = pattern[:-1]
            if type_name.startswith(prefix) and (best is None or pattern < best[0]):
                mapped = value[:-1] + type_name[len(prefix) :] if value.endswith("*") else value
                best = (pattern, mapped)
        return best[1] if best else None

    def implementation_type(self, type_name: str, resource_name: str | None = None) -> str:
        """The type (or provider template file) that ``type_name`` stands for.

        Raises ``ValueError`` naming the chain when mappings loop.
        """
        chain = [type_name]
        current = type_name
        while not is_provider_template(current):
            mapped = self._map_once(current, resource_name)
            if mapped is None or mapped == current:
                break
            if mapped in chain or len(chain) > _MAX_CHAIN:
                raise ValueError(
                    "resource_registry mappings loop: " + " -> ".join([*chain, mapped])
                )
            chain.append(mapped)
            current = mapped
        return current

    def to_data(self) -> dict[str, Any]:
        """The environment as JSON-ready data; ``environment_from_data`` reads it back."""
        registry: dict[str, Any] = dict(self.types)
        if self.base_url is not None:
            registry["base_url"] = self.base_url
        if self.resources:
            registry["resources"] = {
                name: entry.to_data() for name, entry in self.resources.items()
            }
        data: dict[str, Any] = {"resource_registry": registry}
        if self.has_merge_strategies:
            data[LAYERS_SECTION] = [layer.to_data() for layer in self.parameter_layers]
        else:
            data["parameters"] = dict(self.parameters)
            data["parameter_defaults"] = dict(self.parameter_defaults)
            if self.parameter_merge_strategies:
                data[STRATEGIES_SECTION] = dict(self.parameter_merge_strategies)
        if self.event_sinks:
            data["event_sinks"] = list(self.event_sinks)
        if self.encrypted_param_names:
            data["encrypted_param_names"] = list(self.encrypted_param_names)
        return data

    def provider_templates(self) -> set[str]:
        """Every template file the registry names."""
        names = {value for value in self.types.values() if value and is_provider_template(value)}
        for entry in self.resources.values():
            names.update(v for v in entry.types.values() if v and is_provider_template(v))
        return names


def _string_list(value: Any, where: Where, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise where.error(f"{what} must be a string or a list of strings")
    for item in items:
        if item not in allowed:
            raise where.error(
                f"invalid {what} {item!r}{did_you_mean(item, allowed)}; "
                f"acceptable values: {', '.join(allowed)}"
            )
    return tuple(items)


def _resource_entry(raw: Any, where: Where) -> ResourceEntry:
    if not isinstance(raw, dict):
        raise where.error("a resource entry must be a map (hooks, restricted_actions, types)")
    hooks = restricted = None
    types: dict[str, str | None] = {}
    nested: dict[str, Any] = {}
    for key, value in raw.items():
        at = where.child(key)
        if key == "hooks":
            hooks = _string_list(value, at, HOOK_TYPES, "hook type")
        elif key == "restricted_actions":
            restricted = _string_list(value, at, RESTRICTED_ACTIONS, "restricted action")
        elif isinstance(value, dict):
            nested[key] = value  # a resource of a nested stack: applies inside that stack
        elif isinstance(key, str) and (value is None or isinstance(value, str)):
            types[key] = value
        else:
            raise at.error("expected hooks, restricted_actions or a type mapping to a string")
    return ResourceEntry(hooks, restricted, types, nested)


def _registry(
    raw: Any, where: Where
) -> tuple[dict[str, str | None], dict[str, ResourceEntry], str | None]:
    if raw is None:
        return {}, {}, None
    if not isinstance(raw, dict):
        raise where.error("resource_registry must be a map")
    types: dict[str, str | None] = {}
    resources: dict[str, ResourceEntry] = {}
    base_url = None
    errors: list[TemplateError] = []
    for key, value in raw.items():
        at = where.child(key)
        try:
            if key == "resources":
                if not isinstance(value, dict):
                    raise at.error("resources must be a map of resource names")
                for name, entry in value.items():
                    resources[str(name)] = _resource_entry(entry, at.child(name))
            elif key == "base_url":
                base_url = str(value)
            elif not isinstance(key, str) or not (value is None or isinstance(value, str)):
                raise at.error("a type mapping must map a type name to a type name or a file")
            else:
                # a wildcard may map to a wildcard, one type ("OS::*": OS::Heat::None) or a
                # template file, as in Heat
                types[key] = value
        except TemplateError as exc:
            errors.append(exc)
    TemplateErrors.raise_if_any(errors)
    return types, resources, base_url


def load_environment(
    source: str | bytes,
    filename: str = "<environment>",
    *,
    limits: Limits = DEFAULT_LIMITS,
    strict: bool = False,
) -> Environment:
    """Parse one environment file (YAML or JSON).

    A repeated mapping key becomes a note (the last one wins, as in Heat), or an error
    when ``strict``.
    """
    warnings: list[TemplateError] = []
    data, source_map = load_document(
        source, filename, limits=limits, strict=strict, warnings=warnings
    )
    environment = _environment(data, filename, source_map)
    if not warnings:
        return environment
    return replace(environment, notes=(*(w.format() for w in warnings), *environment.notes))


def environment_from_data(data: Any, filename: str | None = None) -> Environment:
    """An environment from already-parsed data (``Environment.to_data()`` or a request).

    The files of ``parameter_layers`` come back as the environments they were, merged
    again in order before the rest of ``data``.
    """
    if not isinstance(data, dict) or LAYERS_SECTION not in data:
        return _environment(data, filename, EMPTY_SOURCE_MAP)
    rest = {key: value for key, value in data.items() if key != LAYERS_SECTION}
    layers = _stored_layers(data[LAYERS_SECTION], Where(filename).child(LAYERS_SECTION))
    return merge_environments([*layers, _environment(rest, filename, EMPTY_SOURCE_MAP)])


def without_parameter_values(data: Mapping[str, Any]) -> dict[str, Any]:
    """Stored environment ``data`` with its ``parameters`` emptied (a pure function).

    A delete converges to an empty template, which defines no parameters: the values given
    for the template being deleted would be refused there, while the registry's hooks (a
    ``pre-delete`` breakpoint) and ``parameter_defaults`` (never checked against the
    template) must stay.
    """
    result = dict(data)
    if "parameters" in result:
        result["parameters"] = {}
    if isinstance(result.get(LAYERS_SECTION), list):
        result[LAYERS_SECTION] = [
            {**layer, "parameters": {}} if isinstance(layer, dict) else layer
            for layer in result[LAYERS_SECTION]
        ]
    return result


def _stored_layers(raw: Any, where: Where) -> list[Environment]:
    if not isinstance(raw, list):
        raise where.error(f"{LAYERS_SECTION} must be a list")
    layers: list[Environment] = []
    errors: list[TemplateError] = []
    for index, layer in enumerate(raw):
        at = where.child(index)
        if not isinstance(layer, dict) or not set(layer) <= set(_LAYER_KEYS):
            errors.append(at.error(f"a layer is a map of {', '.join(_LAYER_KEYS)}"))
            continue
        file = layer.get("file")
        sections = {key: value for key, value in layer.items() if key != "file"}
        try:
            layers.append(_environment(sections, str(file) if file else None, EMPTY_SOURCE_MAP))
        except TemplateError as exc:
            errors.append(exc)
    TemplateErrors.raise_if_any(errors)
    return layers


def _environment(data: Any, filename: str | None, source_map: SourceMap) -> Environment:
    where = Where(filename, (), source_map)
    if data is None:
        return Environment(filename=filename, source_map=source_map)
    if not isinstance(data, dict):
        raise where.error("an environment must be a map (parameters, resource_registry, …)")
    errors: list[TemplateError] = []
    for key in data:
        if key not in SECTIONS:
            errors.append(
                where.child(key).error(f"unknown section {key!r}{did_you_mean(key, SECTIONS)}")
            )
    for name in ("parameters", "parameter_defaults"):
        if data.get(name) is not None and not isinstance(data[name], dict):
            errors.append(where.child(name).error(f"{name} must be a map"))
    strategies, problems = read_merge_strategies(
        data.get(STRATEGIES_SECTION), where.child(STRATEGIES_SECTION)
    )
    errors.extend(problems)
    try:
        types, resources, base_url = _registry(
            data.get("resource_registry"), where.child("resource_registry")
        )
    except TemplateError as exc:
        errors.append(exc)
        types, resources, base_url = {}, {}, None
    sinks = data.get("event_sinks") or []
    if not isinstance(sinks, list):
        errors.append(where.child("event_sinks").error("event_sinks must be a list"))
        sinks = []
    encrypted = data.get("encrypted_param_names") or []
    if not isinstance(encrypted, list):
        errors.append(
            where.child("encrypted_param_names").error("encrypted_param_names must be a list")
        )
        encrypted = []
    TemplateErrors.raise_if_any(errors)
    parameters = dict(data.get("parameters") or {})
    notes = ("event_sinks are accepted but ignored: converge has no event sinks",) if sinks else ()
    return Environment(
        filename=filename,
        parameters=parameters,
        parameter_defaults=dict(data.get("parameter_defaults") or {}),
        types=types,
        resources=resources,
        base_url=base_url,
        event_sinks=tuple(sinks),
        encrypted_param_names=tuple(str(name) for name in encrypted),
        parameter_merge_strategies=strategies,
        notes=notes,
        source_map=source_map,
        origins={name: where.child("parameters", name) for name in parameters},
    )


def merge_environments(environments: Iterable[Environment]) -> Environment:
    """One environment from several, later ones winning (Heat's merge order).

    ``parameters`` and ``parameter_defaults`` merge by name (the template-agnostic view; the
    files' ``parameter_merge_strategies`` apply at prepare time, to ``parameter_layers``),
    type mappings by type name (``null`` removes), per-resource entries key by key.
    """
    envs = list(environments)
    if not envs:
        return Environment()
    if len(envs) == 1:
        return envs[0]
    parameters: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    types: dict[str, str | None] = {}
    resources: dict[str, ResourceEntry] = {}
    origins: dict[str, Where] = {}
    base_url = None
    sinks: list[Any] = []
    encrypted: list[str] = []
    notes: list[str] = []
    for env in envs:
        parameters.update(env.parameters)
        origins.update(env.origins)
        defaults.update(env.parameter_defaults)
        for key, value in env.types.items():
            if value is None:
                types.pop(key, None)
            else:
                types[key] = value
        for name, entry in env.resources.items():
            resources[name] = resources[name].merged(entry) if name in resources else entry
        base_url = env.base_url or base_url
        sinks.extend(env.event_sinks)
        encrypted.extend(name for name in env.encrypted_param_names if name not in encrypted)
        notes.extend(note for note in env.notes if note not in notes)
    return Environment(
        filename=envs[-1].filename,
        parameters=parameters,
        parameter_defaults=defaults,
        types=types,
        resources=resources,
        base_url=base_url,
        event_sinks=tuple(sinks),
        encrypted_param_names=tuple(encrypted),
        parameter_layers=tuple(layer for env in envs for layer in env.layers),
        notes=tuple(notes),
        source_map=envs[-1].source_map,
        origins=origins,
    )
