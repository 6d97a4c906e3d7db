"""Evaluation contexts: what a stack knows before resources exist, and once they report."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from converge.core.template.cfn_parameters import CFN_REGION
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
        mappings: Mapping[str, Any] | None = None,
    ) -> None:
        self._version = version
        self._parameters = dict(parameters)
        self._parameters.update(pseudo_parameters(version, identity))
        self._mappings = mappings or {}
        self._declared = declared
        self._files = files
        self._conditions = conditions
        self.resources = resources
        self.disabled = disabled
        self._check_attribute = check_attribute

    @property
    def version(self) -> str:
        return self._version.date

    def key(self, name: str) -> str:
        """How the template's format spells HOT's section or key ``name``."""
        return self._version.key(name)

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

    def is_resource(self, name: str) -> bool:
        """Whether ``name`` is a resource of the template (CFN's ``Ref`` asks)."""
        return name in self.resources

    def mapping(self, name: str, where: Where) -> Mapping[str, Any]:
        """One of a CFN template's ``Mappings`` (``Fn::FindInMap``)."""
        try:
            mapping = self._mappings[name]
        except KeyError:
            raise where.error(
                f"Fn::FindInMap: unknown mapping {name!r}{did_you_mean(name, self._mappings)}"
            ) from None
        if not isinstance(mapping, Mapping):
            raise where.error(f"Fn::FindInMap: mapping {name!r} is not a map")
        return mapping

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


def pseudo_parameters(version: HotVersion, identity: StackIdentity) -> dict[str, str]:
    """The parameters every stack has: HOT's ``OS::*``, or CFN's ``AWS::*`` (as Heat's
    ``CfnParameters``: the stack's ARN, its name, and a fixed region)."""
    if version.is_cfn:
        arn = (
            f"arn:openstack:heat::{identity.project_id}:stacks/"
            f"{identity.stack_name}/{identity.stack_id}"
        )
        return {
            "AWS::StackId": arn,
            "AWS::StackName": identity.stack_name,
            "AWS::Region": CFN_REGION,
        }
    return {
        "OS::stack_name": identity.stack_name,
        "OS::stack_id": identity.stack_id,
        "OS::project_id": identity.project_id,
    }


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

    def is_resource(self, name: str) -> bool:
        is_resource = getattr(self._scope, "is_resource", None)  # optional (CFN's Ref)
        return bool(is_resource(name)) if is_resource is not None else False

    def mapping(self, name: str, where: Where) -> Mapping[str, Any]:
        mapping = getattr(self._scope, "mapping", None)  # optional (Fn::FindInMap)
        if mapping is None:
            raise where.error("Fn::FindInMap needs the template's Mappings")
        result: Mapping[str, Any] = mapping(name, where)
        return result

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
