"""Refused functions (yaql, CloudFormation's, removed ones), Fn::Select and resource_facade."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from converge.core.bounded_json import parse_json
from converge.core.template.functions.common import describe, is_dynamic, is_list
from converge.core.template.nodes import EvalContext, Function, resolve


class Rejected(Function):
    """A function name that is refused where it appears; ``reason`` says why and what instead."""

    reason: ClassVar[str] = "is not supported"

    def validate_args(self) -> None:
        raise self.where.error(f"{self.fn_name} {self.reason}")

    def resolve(self, ctx: EvalContext) -> Any:  # pragma: no cover - never constructed
        raise self.where.error(f"{self.fn_name} {self.reason}")


def rejected(fn_name: str, reason: str) -> type[Function]:
    """A ``Rejected`` class for one function name with its own explanation."""
    safe = "".join(ch if ch.isalnum() else "_" for ch in fn_name)
    return type(f"Rejected_{safe}", (Rejected,), {"reason": reason, "__doc__": reason})


class Select(Function):
    """``Fn::Select: [index, list_or_map]`` (until 2015-04-30): the item, or "" if missing."""

    def validate_args(self) -> None:
        if is_dynamic(self.args):
            return
        if not is_list(self.args) or len(self.args) != 2:
            raise self.where.error("Fn::Select expects a list [<index>, <list or map>]")

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if not is_list(args) or len(args) != 2:
            raise self.where.error("Fn::Select expects a list [<index>, <list or map>]")
        index, collection = args
        if collection == "":
            return ""  # Heat: what another function gives while its value is not known yet
        if isinstance(collection, str):
            try:  # Heat accepts a list or map serialised as JSON
                collection = parse_json(collection)
            except ValueError:
                raise self.where.error(
                    f"Fn::Select: {collection!r:.100} is neither a list nor a map"
                ) from None
        if collection is None:
            return ""
        if isinstance(collection, Mapping):
            if not isinstance(index, str):
                raise self.where.error(
                    f"Fn::Select: index of a map must be a string, not {index!r}"
                )
            return collection.get(index, "")
        if is_list(collection):
            try:
                position = int(index)
            except (TypeError, ValueError):
                raise self.where.error(
                    f"Fn::Select: index of a list must be an integer, not {index!r}"
                ) from None
            return collection[position] if 0 <= position < len(collection) else ""
        raise self.where.error(f"Fn::Select: cannot select from {describe(collection)}")


class ResourceFacade(Function):
    """``resource_facade: metadata|deletion_policy|update_policy`` of a provider's facade.

    Only a template used as a provider (nested) template has a facade; the evaluation
    context offers it through an optional ``resource_facade(kind, where)`` method.
    """

    kinds: ClassVar[tuple[str, ...]] = ("metadata", "deletion_policy", "update_policy")

    def validate_args(self) -> None:
        if self.args not in self.kinds:
            raise self.where.error(
                f"resource_facade expects one of {', '.join(self.kinds)}, not {self.args!r}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        facade = getattr(ctx, "resource_facade", None)  # an optional capability of the context
        if facade is None:
            raise self.where.error(
                "resource_facade is only available in a template used as a provider "
                "(nested) template"
            )
        return facade(self.args, self.where)
