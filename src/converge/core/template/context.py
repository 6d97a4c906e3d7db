"""Evaluation contexts: what a stack knows before resources exist, and once they report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from converge.core.template.nodes import EvalContext, Unresolved, Where
from converge.core.template.template import did_you_mean
from converge.core.template.versions import HotVersion


class ResourceData(Protocol):
    """What the engine knows about converged resources (what dependencies reported)."""

    def reference_id(self, name: str) -> Any: ...

    def attributes(self, name: str) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class StackIdentity:
    """The names behind the pseudo parameters ``OS::stack_name``, ``OS::stack_id``, …"""

    stack_name: str
    stack_id: str
    project_id: str


# Checks a get_attr against the target's declared attributes; raises a located error.
AttributeCheck = Callable[[str, str, Where], None]


class StackScope:
    """Parameters, conditions and files of one stack operation: an ``EvalContext`` that
    answers everything but resource data (``Unresolved``), for partial evaluation.

    Resources disabled by a false condition evaluate to null, as in Heat.
    """

    def __init__(
        self,
        *,
        version: HotVersion,
        parameters: Mapping[str, Any],
        declared: Mapping[str, Any],
        identity: StackIdentity,
        files: Mapping[str, str],
        conditions: Callable[[str, Where], bool],
        resources: Mapping[str, Any],
        disabled: frozenset[str] = frozenset(),
        check_attribute: AttributeCheck | None = None,
    ) -> None:
        self._version = version
        self._parameters = dict(parameters)
        self._parameters.update(
            {
                "OS::stack_name": identity.stack_name,
                "OS::stack_id": identity.stack_id,
                "OS::project_id": identity.project_id,
            }
        )
        self._declared = declared
        self._files = files
        self._conditions = conditions
        self.resources = resources
        self.disabled = disabled
        self._check_attribute = check_attribute

    @property
    def version(self) -> str:
        return self._version.date

    def parameter(self, name: str, where: Where) -> Any:
        try:
            return self._parameters[name]
        except KeyError:
            pass
        if name in self._declared:
            raise Unresolved(name)  # declared but without a valid value: reported already
        raise where.error(f"unknown parameter {name!r}{did_you_mean(name, self._declared)}")

    def condition(self, name: str, where: Where) -> bool:
        return self._conditions(name, where)

    def file_content(self, key: str, where: Where) -> str:
        try:
            return self._files[key]
        except KeyError:
            raise where.error(f"get_file: {key!r} is not in the files map") from None

    def _known(self, resource: str, where: Where) -> bool:
        """False for a disabled resource; a located error for an unknown one."""
        if resource in self.disabled:
            return False
        if resource not in self.resources:
            raise where.error(
                f"unknown resource {resource!r}{did_you_mean(resource, self.resources)}"
            )
        return True

    def reference_id(self, resource: str, where: Where) -> Any:
        if not self._known(resource, where):
            return None
        raise Unresolved(resource)

    def attribute(self, resource: str, attribute: str, where: Where) -> Any:
        if not self._known(resource, where):
            return None
        if self._check_attribute is not None:
            self._check_attribute(resource, attribute, where)
        raise Unresolved(resource)

    def all_attributes(self, resource: str, where: Where) -> Mapping[str, Any]:
        if not self._known(resource, where):
            return {}
        raise Unresolved(resource)


class DataContext:
    """The stack's scope plus what converged resources reported: full evaluation."""

    def __init__(self, scope: EvalContext, data: ResourceData) -> None:
        self._scope = scope
        self._data = data

    @property
    def version(self) -> str:
        return self._scope.version

    def parameter(self, name: str, where: Where) -> Any:
        return self._scope.parameter(name, where)

    def condition(self, name: str, where: Where) -> bool:
        return self._scope.condition(name, where)

    def file_content(self, key: str, where: Where) -> str:
        return self._scope.file_content(key, where)

    def reference_id(self, resource: str, where: Where) -> Any:
        try:
            return self._scope.reference_id(resource, where)
        except Unresolved:
            return self._data.reference_id(resource)

    def attribute(self, resource: str, attribute: str, where: Where) -> Any:
        try:
            return self._scope.attribute(resource, attribute, where)
        except Unresolved:
            return self._data.attributes(resource).get(attribute)

    def all_attributes(self, resource: str, where: Where) -> Mapping[str, Any]:
        try:
            return self._scope.all_attributes(resource, where)
        except Unresolved:
            return dict(self._data.attributes(resource))
