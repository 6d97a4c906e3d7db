"""CloudFormation's intrinsic functions (``Ref``, ``Fn::GetAtt``, …), as Heat has them.

They serve the two CFN formats (``AWSTemplateFormatVersion: 2010-09-09`` and
``HeatTemplateFormatVersion: 2012-12-12``) and HOT 2013-05-23, which still had most of
them. Two need more than the common ``EvalContext``: ``Ref`` asks whether a name is a
resource and ``Fn::FindInMap`` reads the template's ``Mappings``; a context offers both
through the optional ``CfnContext`` methods (``StackScope`` and ``DataContext`` do).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar, Protocol

from converge.core.template.functions.common import describe, is_dynamic, is_list
from converge.core.template.functions.conditions import And, Equals, If, Not, Or
from converge.core.template.functions.legacy import ResourceFacade
from converge.core.template.functions.references import GetAttr, GetParam
from converge.core.template.functions.strings import ListJoin, replace_placeholders
from converge.core.template.nodes import EvalContext, Function, Reference, Where, references
from converge.core.template.nodes import resolve as resolve_node
from converge.errors import TemplateError

# What Fn::GetAZs answers: converge has no compute service to ask, so it gives what Heat
# gives without one, the name of Nova's default availability zone.
AVAILABILITY_ZONES = ("nova",)


class CfnContext(Protocol):
    """What a context offers CFN functions beyond ``EvalContext`` (optional methods)."""

    def is_resource(self, name: str) -> bool:
        """Whether ``name`` is a resource of the template (enabled or not)."""

    def mapping(self, name: str, where: Where) -> Mapping[str, Any]:
        """One entry of the template's ``Mappings``; a located error when there is none."""


def _capability(ctx: EvalContext, name: str, function: Function) -> Any:
    method = getattr(ctx, name, None)  # optional: only stack contexts know the template
    if method is None:
        raise function.where.error(f"{function.fn_name} needs the template's stack to evaluate")
    return method


class Ref(Function):
    """``Ref: name``: a resource's reference id, else a parameter's value (Heat's order)."""

    def validate_args(self) -> None:
        if not (isinstance(self.args, str) or is_dynamic(self.args)):
            raise self.where.error(
                f"Ref expects a resource or parameter name, not {describe(self.args)}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        name = resolve_node(self.args, ctx)
        if not isinstance(name, str):
            raise self.where.error(f"Ref: the name must be a string, not {describe(name)}")
        is_resource = getattr(ctx, "is_resource", None)  # optional: see CfnContext
        if is_resource is not None and is_resource(name):
            return ctx.reference_id(name, self.where)
        try:
            return ctx.parameter(name, self.where)
        except TemplateError as exc:
            raise self.where.error(f"Ref: {exc.message}, and no resource has that name") from None

    def references(self) -> Iterator[Reference]:
        # A parameter's name is among these too: callers keep only the template's resources.
        yield from references(self.args)
        if isinstance(self.args, str):
            yield Reference(self.args, None, self.where)


class ParamRef(GetParam):
    """``Ref: name`` inside a condition: a parameter only (Heat's ``ParamRef``)."""

    def validate_args(self) -> None:
        if not (isinstance(self.args, str) or is_dynamic(self.args)):
            raise self.where.error(f"Ref expects a parameter name, not {describe(self.args)}")


class GetAtt(GetAttr):
    """``Fn::GetAtt: [resource, attribute]``: exactly two arguments, no path."""

    def validate_args(self) -> None:
        args = self.args
        if not is_list(args) or len(args) != 2:
            got = f"{len(args)} arguments" if is_list(args) else describe(args)
            raise self.where.error(
                f"Fn::GetAtt expects a list [resource_name, attribute], got {got}"
            )
        for what, part in (("resource name", args[0]), ("attribute name", args[1])):
            if not (isinstance(part, str) or is_dynamic(part)):
                raise self.where.error(f"Fn::GetAtt: {what} must be a string, not {describe(part)}")


class Join(ListJoin):
    """``Fn::Join: [delimiter, [items...]]``: Heat's 2013 ``list_join`` under its CFN name."""

    def validate_args(self) -> None:
        args = self.args
        if not is_list(args) or len(args) != 2:
            raise self.where.error("Fn::Join expects a list [<delimiter>, [<item>, ...]]")
        if not (isinstance(args[0], str) or is_dynamic(args[0])):
            raise self.where.error(
                f"Fn::Join: the delimiter must be a string, not {describe(args[0])}"
            )


class Split(Function):
    """``Fn::Split: [delimiter, string]`` -> the list of pieces."""

    _example = "Fn::Split: [',', 'str1,str2']"

    def validate_args(self) -> None:
        args = self.args
        if is_dynamic(args):
            return
        if not is_list(args) or len(args) != 2:
            raise self.where.error(f"Fn::Split expects a list like {self._example}")
        if not (isinstance(args[0], str) or is_dynamic(args[0])):
            raise self.where.error(
                f"Fn::Split: the delimiter must be a string, not {describe(args[0])}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve_node(self.args, ctx)
        if not is_list(args) or len(args) != 2:
            raise self.where.error(f"Fn::Split expects a list like {self._example}")
        delimiter, text = args
        if not isinstance(delimiter, str) or not delimiter:
            raise self.where.error(
                f"Fn::Split: the delimiter must be a non-empty string, not {delimiter!r}"
            )
        if not isinstance(text, str):
            raise self.where.error(f"Fn::Split can only split a string, not {describe(text)}")
        return text.split(delimiter)


class Replace(Function):
    """``Fn::Replace: [{placeholder: value}, string]``: Heat's substitution (longest first)."""

    _example = "Fn::Replace: [{'$var1': foo, '%var2%': bar}, '$var1 is %var2%']"

    def validate_args(self) -> None:
        args = self.args
        if is_dynamic(args):
            return
        if not is_list(args) or len(args) != 2:
            raise self.where.error(f"Fn::Replace expects a list like {self._example}")
        mapping, text = args
        if not (isinstance(mapping, Mapping) or is_dynamic(mapping)):
            raise self.where.error(
                f"Fn::Replace: the replacements must be a map, not {describe(mapping)}"
            )
        if not (isinstance(text, str) or is_dynamic(text)):
            raise self.where.error(f"Fn::Replace: the text must be a string, not {describe(text)}")

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve_node(self.args, ctx)
        if not is_list(args) or len(args) != 2:
            raise self.where.error(f"Fn::Replace expects a list like {self._example}")
        mapping, text = args
        if not isinstance(mapping, Mapping):
            raise self.where.error(
                f"Fn::Replace: the replacements must be a map, not {describe(mapping)}"
            )
        if not isinstance(text, str):
            raise self.where.error(f"Fn::Replace: the text must be a string, not {describe(text)}")
        texts: dict[str, str] = {}
        for key, value in mapping.items():
            if not isinstance(key, str) or not key:
                raise self.where.error(
                    f"Fn::Replace: placeholders must be non-empty strings, not {key!r}"
                )
            if value is None:
                texts[key] = ""
            elif isinstance(value, str | int | float):
                texts[key] = str(value)
            else:
                raise self.where.error(
                    f"Fn::Replace: the value of {key!r} must be a string or a number, "
                    f"not {describe(value)}"
                )
        return replace_placeholders(text, texts)


class Base64(Function):
    """``Fn::Base64: string``: the string unchanged, as Heat (which takes user data as text)."""

    def validate_args(self) -> None:
        if not (isinstance(self.args, str) or is_dynamic(self.args)):
            raise self.where.error(f"Fn::Base64 expects a string, not {describe(self.args)}")

    def resolve(self, ctx: EvalContext) -> Any:
        value = resolve_node(self.args, ctx)
        if not isinstance(value, str):
            raise self.where.error(f"Fn::Base64 expects a string, not {describe(value)}")
        return value


class FindInMap(Function):
    """``Fn::FindInMap: [mapping, key, value]``: ``Mappings[mapping][key][value]``."""

    def validate_args(self) -> None:
        if not is_list(self.args) or len(self.args) != 3:
            raise self.where.error(
                "Fn::FindInMap expects a list [<mapping name>, <key>, <value name>]"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        name, key, value = resolve_node(self.args, ctx)
        if not isinstance(name, str):
            raise self.where.error(
                f"Fn::FindInMap: the mapping name must be a string, not {describe(name)}"
            )
        mapping = _capability(ctx, "mapping", self)(name, self.where)
        entry = mapping.get(key) if isinstance(key, str | int) else None
        if not isinstance(entry, Mapping):
            raise self.where.error(
                f"Fn::FindInMap: mapping {name!r} has no key {key!r}"
                f" (it has: {', '.join(map(str, mapping)) or 'none'})"
            )
        if not isinstance(value, str | int) or value not in entry:
            raise self.where.error(
                f"Fn::FindInMap: {name}.{key} has no value {value!r}"
                f" (it has: {', '.join(map(str, entry)) or 'none'})"
            )
        return entry[value]


class GetAZs(Function):
    """``Fn::GetAZs: region``: the availability zones (``AVAILABILITY_ZONES``); the region,
    as in Heat, is not used."""

    def resolve(self, ctx: EvalContext) -> Any:
        resolve_node(self.args, ctx)  # its functions still have to be valid
        return list(AVAILABILITY_ZONES)


_MEMBER = re.compile(r"\.member\.([0-9]+)\.(.*)", re.DOTALL)


class MemberListToMap(Function):
    """``Fn::MemberListToMap: [key_name, value_name, ['.member.0.Name=k', …]]`` -> a map.

    AWS query-style pairs (``.member.N.<key_name>=…`` and ``.member.N.<value_name>=…``)
    become ``{key: value}``; members without both are left out, as in Heat.
    """

    _example = "Fn::MemberListToMap: [Name, Value, ['.member.0.Name=key', '.member.0.Value=door']]"

    def validate_args(self) -> None:
        args = self.args
        if not is_list(args) or len(args) != 3:
            raise self.where.error(f"Fn::MemberListToMap expects a list like {self._example}")
        for what, part in (("key name", args[0]), ("value name", args[1])):
            if not isinstance(part, str):
                raise self.where.error(
                    f"Fn::MemberListToMap: the {what} must be a string, not {describe(part)}"
                )

    def resolve(self, ctx: EvalContext) -> Any:
        key_name, value_name, members = resolve_node(self.args, ctx)
        if not is_list(members):
            raise self.where.error(
                f"Fn::MemberListToMap: the member list must be a list, not {describe(members)}"
            )
        pairs: dict[str, str] = {}
        for item in members:
            if not isinstance(item, str):
                raise self.where.error(
                    f"Fn::MemberListToMap: member list items must be strings, not {describe(item)}"
                )
            name, _, value = item.partition("=")
            pairs[name] = value  # a later item for the same name wins, as in Heat's dict()
        by_index: dict[int, dict[str, str]] = {}
        for name, value in pairs.items():
            match = _MEMBER.match(name)
            if match:
                by_index.setdefault(int(match.group(1)), {})[match.group(2)] = value
        result: dict[str, str] = {}
        for index in sorted(by_index):
            member = by_index[index]
            if key_name in member and value_name in member:
                result[member[key_name]] = member[value_name]
        return result


class CfnResourceFacade(ResourceFacade):
    """``Fn::ResourceFacade: Metadata|DeletionPolicy|UpdatePolicy`` in a provider template."""

    _kinds: ClassVar[Mapping[str, str]] = {
        "Metadata": "metadata",
        "DeletionPolicy": "deletion_policy",
        "UpdatePolicy": "update_policy",
    }

    def validate_args(self) -> None:
        if not isinstance(self.args, str) or self.args not in self._kinds:
            raise self.where.error(
                f"Fn::ResourceFacade expects one of {', '.join(self._kinds)}, not {self.args!r}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        facade = getattr(ctx, "resource_facade", None)  # an optional capability of the context
        if facade is None:
            raise self.where.error(
                "Fn::ResourceFacade is only available in a template used as a provider "
                "(nested) template"
            )
        return facade(self._kinds[self.args], self.where)


class CfnIf(If):
    """``Fn::If: [condition, value_if_true, value_if_false]``."""

    def validate_args(self) -> None:
        if not is_list(self.args) or len(self.args) != 3:
            raise self.where.error(
                "Fn::If expects a list [<condition name>, <value_if_true>, <value_if_false>]"
            )
        # The arguments were parsed with the resource functions, where Ref may name a
        # resource; in a condition it names a parameter only (Heat's ParamRef).
        self.args = [_parameter_refs(self.args[0]), *self.args[1:]]
        super().validate_args()


def _parameter_refs(node: Any) -> Any:
    """``node`` with every ``Ref`` made a ``ParamRef``."""
    if isinstance(node, Ref):
        return ParamRef(node.fn_name, _parameter_refs(node.args), node.where)
    if isinstance(node, Function):
        return node.with_args(_parameter_refs(node.args))
    if isinstance(node, dict):
        return {key: _parameter_refs(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_parameter_refs(value) for value in node]
    return node


class CfnEquals(Equals):
    """``Fn::Equals: [value1, value2]``."""

    def validate_args(self) -> None:
        if not is_list(self.args) or len(self.args) != 2:
            raise self.where.error("Fn::Equals expects a list of two values [<value1>, <value2>]")


class CfnNot(Not):
    """``Fn::Not: [condition]``: a list of exactly one condition, as in Heat."""

    def validate_args(self) -> None:
        if not is_list(self.args) or len(self.args) != 1:
            raise self.where.error(
                f"Fn::Not expects a list of one condition [<condition>], not {describe(self.args)}"
            )
        self.args = self.args[0]
        super().validate_args()

    def __repr__(self) -> str:
        return f"{{{self.fn_name}: [{self.args!r}]}}"


class CfnAnd(And):
    """``Fn::And: [condition, condition, ...]``."""


class CfnOr(Or):
    """``Fn::Or: [condition, condition, ...]``."""
