"""A small fake EvalContext and helpers shared by the function tests (holds no tests)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from converge.core.template import nodes
from converge.core.template.nodes import SourceMap, Unresolved, Where
from converge.core.template.versions import LATEST, hot_version

PLACE = Where(
    "stack.yaml",
    ("resources", "server", "properties", "value"),
    SourceMap({("resources", "server", "properties", "value"): 12}),
)


@dataclass
class FakeContext:
    """Answers from plain dicts; ``resources`` None means no resource data yet (partial)."""

    version: str = LATEST.date
    parameters: dict[str, Any] = field(default_factory=dict)
    conditions: dict[str, bool] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    resources: dict[str, tuple[Any, dict[str, Any]]] | None = None
    facade: dict[str, Any] | None = None

    def parameter(self, name: str, where: Where) -> Any:
        if name == "OS::stack_name":
            return "demo"
        if name not in self.parameters:
            raise where.error(f"the parameter {name!r} is not defined")
        return self.parameters[name]

    def condition(self, name: str, where: Where) -> bool:
        if name not in self.conditions:
            raise where.error(f"the condition {name!r} is not defined")
        return self.conditions[name]

    def file_content(self, key: str, where: Where) -> str:
        if key not in self.files:
            raise where.error(f"no content in files for {key!r}")
        return self.files[key]

    def _resource(self, name: str, where: Where) -> tuple[Any, dict[str, Any]]:
        if self.resources is None:
            raise Unresolved(name)
        if name not in self.resources:
            raise where.error(f"unknown resource {name!r}")
        return self.resources[name]

    def reference_id(self, resource: str, where: Where) -> Any:
        return self._resource(resource, where)[0]

    def attribute(self, resource: str, attribute: str, where: Where) -> Any:
        return self._resource(resource, where)[1].get(attribute)

    def all_attributes(self, resource: str, where: Where) -> Mapping[str, Any]:
        return dict(self._resource(resource, where)[1])


def parse(snippet: Any, version: str = LATEST.date) -> Any:
    return nodes.parse(snippet, hot_version(version).functions, PLACE)


def parse_condition(snippet: Any, version: str = LATEST.date) -> Any:
    return nodes.parse(snippet, hot_version(version).condition_functions, PLACE)


def evaluate(snippet: Any, version: str = LATEST.date, **context: Any) -> Any:
    """Parse ``snippet`` with ``version``'s functions and resolve it completely."""
    ctx = FakeContext(version=version, **context)
    if ctx.resources is None:
        ctx.resources = {}
    return nodes.resolve(parse(snippet, version), ctx)
