"""Functions that read from outside the snippet: get_param, get_resource, get_attr, get_file."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from converge.core.template.functions.common import describe, is_dynamic, is_list, walk_path
from converge.core.template.nodes import (
    ALL_ATTRIBUTES,
    EvalContext,
    Function,
    Reference,
    references,
    resolve,
)


class GetParam(Function):
    """``get_param: name`` or ``get_param: [name, key_or_index, ...]``.

    A path that does not fit the value gives ``""``, as in Heat.
    """

    def validate_args(self) -> None:
        args = self.args
        if is_dynamic(args):
            return
        if is_list(args):
            if not args:
                raise self.where.error("get_param needs a parameter name")
            name = args[0]
        else:
            name = args
        if not (isinstance(name, str) or is_dynamic(name)):
            raise self.where.error(
                f"get_param expects a parameter name or a list [name, path...], "
                f"not {describe(name)}"
            )
        if isinstance(name, str) and not name:
            raise self.where.error("get_param needs a parameter name")

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if is_list(args) and args:
            name, path = args[0], args[1:]
        else:
            name, path = args, []
        if not isinstance(name, str) or not name:
            raise self.where.error(f"get_param: parameter name must be a string, not {name!r}")
        value = ctx.parameter(name, self.where)
        if not path:
            return value
        try:
            return walk_path(value, path, numeric_strings=True)
        except (LookupError, TypeError, ValueError):
            return ""


class GetResource(Function):
    """``get_resource: name``: the resource's reference id (its physical id for most types)."""

    def validate_args(self) -> None:
        if not (isinstance(self.args, str) or is_dynamic(self.args)):
            raise self.where.error(
                f"get_resource expects a resource name, not {describe(self.args)}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        name = resolve(self.args, ctx)
        if not isinstance(name, str):
            raise self.where.error(f"get_resource: resource name must be a string, not {name!r}")
        return ctx.reference_id(name, self.where)

    def references(self) -> Iterator[Reference]:
        yield from references(self.args)
        if isinstance(self.args, str):
            yield Reference(self.args, None, self.where)


class GetAttr(Function):
    """``get_attr: [resource, attribute, path...]``; a path that does not fit gives null."""

    # The whole-resource form [resource] (every attribute as a map) came in 2015-10-15.
    allow_all_attributes: ClassVar[bool] = False

    def validate_args(self) -> None:
        args = self.args
        shape = (
            "[resource_name] or [resource_name, attribute, path...]"
            if self.allow_all_attributes
            else "[resource_name, attribute, path...]"
        )
        if not is_list(args):
            raise self.where.error(f"get_attr expects a list {shape}, not {describe(args)}")
        minimum = 1 if self.allow_all_attributes else 2
        if len(args) < minimum:
            raise self.where.error(f"get_attr expects {shape}")
        named = [("resource name", args[0])]
        if len(args) > 1:
            named.append(("attribute name", args[1]))
        for what, part in named:
            if not (isinstance(part, str) or is_dynamic(part)):
                raise self.where.error(f"get_attr: {what} must be a string, not {describe(part)}")

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        name = args[0]
        if not isinstance(name, str):
            raise self.where.error(f"get_attr: resource name must be a string, not {name!r}")
        if len(args) == 1:
            return ctx.all_attributes(name, self.where)
        attribute = args[1]
        if not isinstance(attribute, str):
            raise self.where.error(f"get_attr: attribute name must be a string, not {attribute!r}")
        value = ctx.attribute(name, attribute, self.where)
        path = args[2:]
        if value is None or not path:
            return value
        try:
            return walk_path(value, path, numeric_strings=False)
        except (LookupError, TypeError, ValueError):
            return None

    def references(self) -> Iterator[Reference]:
        yield from references(self.args)
        args = self.args
        if not isinstance(args[0], str):
            return  # named by a function: known once parameters are applied
        if len(args) == 1:
            attribute = ALL_ATTRIBUTES
        elif isinstance(args[1], str):
            attribute = args[1]
        else:
            attribute = ALL_ATTRIBUTES  # not known yet: assume it may need any of them
        yield Reference(args[0], attribute, self.where)


class GetAttrAllAttributes(GetAttr):
    """``get_attr`` from 2015-10-15: also ``[resource]`` for a map of all its attributes."""

    allow_all_attributes = True


class GetFile(Function):
    """``get_file: key``: the content the request's files map holds for ``key``."""

    def validate_args(self) -> None:
        if not (isinstance(self.args, str) or is_dynamic(self.args)):
            raise self.where.error(f"get_file expects a file name, not {describe(self.args)}")

    def resolve(self, ctx: EvalContext) -> Any:
        key = resolve(self.args, ctx)
        if not isinstance(key, str):
            raise self.where.error(f"get_file: file name must be a string, not {key!r}")
        return ctx.file_content(key, self.where)
