"""Condition functions (equals, not, and, or) and ``if``, which picks a value by a condition."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar

from converge.core.template.functions.common import describe, is_dynamic, is_list
from converge.core.template.functions.legacy import Rejected
from converge.core.template.nodes import (
    REMOVED,
    EvalContext,
    Function,
    FunctionTable,
    Reference,
    Unresolved,
    parse,
    partial,
    references,
    resolve,
)


def condition_value(function: Function, value: Any, ctx: EvalContext) -> bool:
    """A resolved condition argument as a boolean: a boolean, or a condition's name."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return ctx.condition(value, function.where)
    raise function.where.error(
        f"{function.fn_name}: expected a condition name, a boolean or a condition function, "
        f"not {describe(value)}"
    )


def _check_condition_argument(function: Function, value: Any) -> None:
    if not (isinstance(value, str | bool) or is_dynamic(value)):
        raise function.where.error(
            f"{function.fn_name}: expected a condition name, a boolean or a condition "
            f"function, not {describe(value)}"
        )


class Equals(Function):
    """``equals: [value1, value2]``: whether the two values are equal."""

    def validate_args(self) -> None:
        if not is_list(self.args) or len(self.args) != 2:
            raise self.where.error("equals expects a list of two values [<value1>, <value2>]")

    def resolve(self, ctx: EvalContext) -> Any:
        first, second = resolve(self.args, ctx)
        return bool(first == second)


class Not(Function):
    """``not: condition``."""

    def validate_args(self) -> None:
        _check_condition_argument(self, self.args)

    def resolve(self, ctx: EvalContext) -> Any:
        return not condition_value(self, resolve(self.args, ctx), ctx)


class _Junction(Function):
    """``and`` / ``or`` over a list of at least two conditions."""

    def validate_args(self) -> None:
        if not is_list(self.args) or len(self.args) < 2:
            raise self.where.error(
                f"{self.fn_name} expects a list of at least two conditions, "
                f"not {describe(self.args)}"
            )
        for item in self.args:
            _check_condition_argument(self, item)

    def _values(self, ctx: EvalContext) -> Iterator[bool]:
        # Arguments are all resolved first (errors show whatever the outcome), then
        # condition names are looked up lazily, as Heat does.
        for value in resolve(self.args, ctx):
            yield condition_value(self, value, ctx)


class And(_Junction):
    """``and: [condition, condition, ...]``: true when every condition is."""

    def resolve(self, ctx: EvalContext) -> Any:
        return all(self._values(ctx))


class Or(_Junction):
    """``or: [condition, condition, ...]``: true when any condition is."""

    def resolve(self, ctx: EvalContext) -> Any:
        return any(self._values(ctx))


class If(Function):
    """``if: [condition, value_if_true, value_if_false]``.

    The condition is a condition name, a boolean or an inline condition expression, parsed
    with the version's condition functions (``condition_functions``, set per version).
    Partial evaluation keeps only the branch taken, so the other branch's references go.
    """

    condition_functions: ClassVar[FunctionTable] = MappingProxyType({})
    nullable: ClassVar[bool] = False  # two-argument form (2021-04-16): false removes the value
    _allowed: ClassVar[Mapping[str, type[Function]] | None] = None

    def validate_args(self) -> None:
        args = self.args
        counts = (2, 3) if self.nullable else (3,)
        if not is_list(args) or len(args) not in counts:
            shape = "[condition, value_if_true, value_if_false]"
            if self.nullable:
                shape += " or [condition, value_if_true]"
            raise self.where.error(f"if expects a list {shape}")
        condition = args[0]
        if self.condition_functions:
            where = self.where.child(self.fn_name, 0)
            condition = parse(condition, self.condition_functions, where)
            self._check_condition_functions(condition)
        _check_condition_argument(self, condition)
        self.args = [condition, *args[1:]]

    @classmethod
    def _allowed_condition_functions(cls) -> Mapping[str, type[Function]]:
        # computed once per class: the table is complete only after the class is made
        allowed = cls.__dict__.get("_allowed")
        if allowed is None:
            allowed = {
                name: implementation
                for name, implementation in cls.condition_functions.items()
                if not issubclass(implementation, Rejected)
            }
            cls._allowed = allowed
        return allowed

    def _check_condition_functions(self, node: Any) -> None:
        if isinstance(node, Function):
            allowed = self._allowed_condition_functions()
            if not isinstance(node, tuple(allowed.values())):
                raise node.where.error(
                    f"{node.fn_name} is not allowed in a condition; use "
                    + ", ".join(sorted(allowed))
                )
            self._check_condition_functions(node.args)
        elif isinstance(node, Mapping):
            for value in node.values():
                self._check_condition_functions(value)
        elif is_list(node):
            for value in node:
                self._check_condition_functions(value)

    def _branch(self, ctx: EvalContext) -> Any:
        if condition_value(self, resolve(self.args[0], ctx), ctx):
            return self.args[1]
        return self.args[2] if len(self.args) == 3 else REMOVED

    def resolve(self, ctx: EvalContext) -> Any:
        branch = self._branch(ctx)
        return REMOVED if branch is REMOVED else resolve(branch, ctx)

    def partial(self, ctx: EvalContext) -> Any:
        try:
            branch = self._branch(ctx)
        except Unresolved:
            # The condition waits for a parameter without a value (validate without
            # values, or a problem already reported): keep both branches for later.
            args = partial(self.args, ctx)
            return self if args is self.args else self.with_args(args)
        return REMOVED if branch is REMOVED else partial(branch, ctx)

    def references(self) -> Iterator[Reference]:
        return references(self.args[1:])


class IfNullable(If):
    """``if`` from 2021-04-16: ``[condition, value]`` removes the value when false."""

    nullable = True
