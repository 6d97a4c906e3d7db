"""Resource groups (Heat's ``OS::Heat::ResourceGroup``): which members, named how, in what order.

A group is a nested stack of ``count`` members made from one ``resource_def``. Members are
named ``"0"``, ``"1"``, … skipping the names a removal policy took out (they are never used
again while the policy remembers them), so shrinking removes the highest names first and a
removed member's name leaves a gap. A rolling update or a batched create reaches the
target in steps: each step is a whole nested template in which only a batch of members has
the new definition.

Pure functions over plain data, as Heat's ``resource_group`` and ``scaling/rolling_update``
decide them; the plugin (``resources/builtin/resource_group.py``) does the I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NESTED_VERSION = "2021-04-16"
REFS_MAP_OUTPUT = "refs_map"
ATTRIBUTES_OUTPUT = "attributes"
REMOVE_APPEND, REMOVE_UPDATE = "append", "update"


@dataclass(frozen=True)
class Batch:
    """One step of a batched change: the group's size after it, and how many members of
    that size carry the new definition (new ones first, then replaced ones)."""

    capacity: int
    new_members: int


def member_names(count: int, skipped: Iterable[str]) -> list[str]:
    """The first ``count`` names ``"0"``, ``"1"``, … that no removal policy took out."""
    skip = set(skipped)
    candidates = (str(index) for index in itertools.count())
    return list(itertools.islice((name for name in candidates if name not in skip), count))


def member_definition(name: str, resource_def: Mapping[str, Any], index_var: str) -> dict[str, Any]:
    """The member's resource snippet: ``index_var`` replaced by its name in the properties."""
    snippet: dict[str, Any] = {"type": resource_def["type"]}
    properties = {
        key: value
        for key, value in (resource_def.get("properties") or {}).items()
        if value is not None  # Heat leaves unset properties out of the member
    }
    if properties:
        snippet["properties"] = _substitute(properties, index_var, name)
    if resource_def.get("metadata"):
        snippet["metadata"] = resource_def["metadata"]
    return snippet


def _substitute(value: Any, index_var: str, name: str) -> Any:
    if isinstance(value, str):
        return value.replace(index_var, name)
    if isinstance(value, Mapping):
        return {key: _substitute(item, index_var, name) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_substitute(item, index_var, name) for item in value]
    return value


def removed_names(
    policies: Sequence[Mapping[str, Any]] | None,
    mode: str,
    remembered: Iterable[str],
    refs: Mapping[str, Any] | None,
) -> list[str]:
    """The names removal policies take out, sorted, as Heat's ``name_blacklist``.

    ``remembered``: the names taken out by earlier operations (kept in ``append`` mode,
    forgotten in ``update`` mode). ``refs``: the members that exist, name to reference
    id; None before the group exists, when every listed entry is taken as a name. An entry
    of ``resource_list`` is a member's name (or index) or its reference id.
    """
    before = set(remembered)
    removed = set() if mode == REMOVE_UPDATE else set(before)
    for policy in policies or ():
        for entry in policy.get("resource_list") or ():
            text = str(entry)
            if refs is None or text in before or text in refs:
                removed.add(text)
            elif isinstance(entry, str):
                removed.update(name for name, ref in refs.items() if ref == entry)
    return sorted(removed, key=_name_order)


def _name_order(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def nested_template(members: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, Any]:
    """The nested stack's template: the members, and outputs the group's attributes read
    (every member's reference and every member's attributes, by name)."""
    names = [name for name, _ in members]
    return {
        "heat_template_version": NESTED_VERSION,
        "resources": {name: dict(snippet) for name, snippet in members},
        "outputs": {
            REFS_MAP_OUTPUT: {"value": {name: {"get_resource": name} for name in names}},
            ATTRIBUTES_OUTPUT: {"value": {name: {"get_attr": [name]} for name in names}},
        },
    }


def batches(target: int, current: int, batch_size: int, min_in_service: int) -> list[Batch]:
    """The steps of a rolling update (or, from ``current`` 0, a batched create).

    Each step puts at most ``batch_size`` members on the new definition while keeping
    at least ``min_in_service`` of the old ones (bounded by the sizes), as Heat's
    ``rolling_update.next_batch`` does.
    """
    if batch_size < 1:
        raise ValueError("max_batch_size must be at least 1")
    steps: list[Batch] = []
    updated = 0
    while not (updated >= current == target):
        effective_min = min(min_in_service, target, current)
        size = min(batch_size, max(target - updated, 0))
        capacity = size + max(min(current, target - size), effective_min)
        steps.append(Batch(capacity, size))
        updated += size - max(capacity - max(current, target), 0)
        current = capacity
        if len(steps) > target + current + 1:  # cannot happen for valid sizes; never loop
            raise ValueError("a batched update that does not converge")
    return steps


def step_members(
    old: Sequence[tuple[str, Mapping[str, Any]]],
    new_definition: Mapping[str, Any],
    index_var: str,
    names: Sequence[str],
    target: int,
    step: Batch,
) -> list[tuple[str, Mapping[str, Any]]]:
    """The members of the nested template after one step.

    ``old``: the members as they are (name, snippet). ``names``: the group's names for
    the step's capacity in order. The members to keep are those nearest the front of
    ``names``; the first ``step.new_members`` that differ from the new definition get
    it, and members the group lacks are added with it, taking the free names in order.
    """
    capacity = step.capacity

    def priority(item: tuple[str, Mapping[str, Any]]) -> int:
        # Replaced (or removed) first: members outside the target, then the last ones.
        name = item[0]
        if name not in names:
            return 0
        index = names.index(name)
        return target - index if index < target else capacity

    ordered = sorted(old, key=priority)[-capacity:] if capacity else []
    existing = {name for name, _ in old}
    free = (name for name in names if name not in existing)
    to_replace = step.new_members - (capacity - len(ordered))
    result: list[tuple[str, Mapping[str, Any]]] = []
    for name, snippet in ordered:
        wanted = member_definition(name, new_definition, index_var)
        if snippet != wanted and to_replace > 0:
            to_replace -= 1
            result.append((name, wanted))
        else:
            result.append((name, snippet))
    for _ in range(capacity - len(ordered)):
        name = next(free)
        result.append((name, member_definition(name, new_definition, index_var)))
    return sorted(result, key=lambda item: _name_order(item[0]))


def members_from(
    names: Iterable[str], resource_def: Mapping[str, Any], index_var: str
) -> list[tuple[str, Mapping[str, Any]]]:
    """Every named member with one definition."""
    return [(name, member_definition(name, resource_def, index_var)) for name in names]


def group_attribute(
    name: str,
    names: Sequence[str],
    refs: Mapping[str, Any],
    attributes: Mapping[str, Mapping[str, Any]],
    removed: Sequence[str],
) -> Any:
    """One attribute of the group, from its members' references and attributes.

    ``refs``, ``refs_map``, ``removed_rsrc_list``, ``attributes`` (member name to that
    member's attributes: ``get_attr: [group, attributes, A]`` walks to A of each),
    ``resource.N`` (member N's reference), ``resource.N.A`` (member N's attribute A), and
    any other name A: the list of every member's A, in member order.
    """
    if name == "refs":
        return [refs.get(member) for member in names]
    if name == "refs_map":
        return {member: refs.get(member) for member in names}
    if name == "removed_rsrc_list":
        return list(removed)
    if name == "attributes":
        return _by_attribute(names, attributes)
    if name.startswith("resource."):
        parts = name.split(".", 2)
        member = parts[1]
        if len(parts) == 2:
            return refs.get(member)
        return (attributes.get(member) or {}).get(parts[2])
    return [(attributes.get(member) or {}).get(name) for member in names]


def _by_attribute(
    names: Sequence[str], attributes: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Attribute name to {member name: value}, so the path after ``attributes`` picks one."""
    result: dict[str, dict[str, Any]] = {}
    for member in names:
        for key, value in (attributes.get(member) or {}).items():
            result.setdefault(key, {})[member] = value
    return result


def chain_template(
    types: Sequence[str],
    properties: Mapping[str, Any] | None,
    concurrent: bool,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Members of ``OS::Heat::ResourceChain``: one per type, named by position, each
    depending on the one before unless ``concurrent``."""
    for index, type_name in enumerate(types):
        snippet: dict[str, Any] = {"type": type_name}
        if properties:
            snippet["properties"] = dict(properties)
        if index and not concurrent:
            snippet["depends_on"] = [str(index - 1)]
        yield str(index), snippet
