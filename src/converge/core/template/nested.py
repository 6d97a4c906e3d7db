"""Nested stacks: what a provider template's stack inherits from the stack that uses it.

A resource whose type is a template file (``type: server.yaml``, or a registry mapping to
one) is a stack of its own. As in Heat, that stack's environment is its parent's with
three changes: its parameters are the resource's properties (given separately, so the
parent's ``parameters`` are dropped; ``parameter_defaults`` stay), the mapping that turned
the resource's type into this template is removed (so the template may use the type it
implements), and the per-resource registry entries become those written under the
resource's name (``resources: {web: {db: {hooks: pre-create}}}`` gives the nested stack
of ``web`` a hook on its ``db``).
"""

from __future__ import annotations

import fnmatch
from typing import Any

from converge.core.template.environment import (
    LAYERS_SECTION,
    Environment,
    environment_from_data,
)

# Heat's max_nested_stack_depth default: a provider template using itself must end.
MAX_NESTING_DEPTH = 5


def child_environment(
    parent: Environment, resource_name: str, resource_type: str, provider: str
) -> Environment:
    """The environment of the nested stack made for ``resource_name`` (a pure function)."""
    data = parent.to_data()
    data["parameters"] = {}
    for layer in data.get(LAYERS_SECTION, ()):
        layer["parameters"] = {}  # each merged file's own, kept for its merge strategies
    registry: dict[str, Any] = data["resource_registry"]
    if registry.get(resource_type) == provider:
        del registry[resource_type]
    entries: dict[str, Any] = registry.pop("resources", {})
    nested: dict[str, Any] = {}
    for pattern, entry in entries.items():
        if pattern == resource_name or fnmatch.fnmatchcase(resource_name, pattern):
            nested.update({key: value for key, value in entry.items() if isinstance(value, dict)})
    if nested:
        registry["resources"] = nested
    return environment_from_data(data, parent.filename)
