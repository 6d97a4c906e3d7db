"""``repeat``: a template copied once per item (or per combination of items) of its loops."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from converge.core.template.functions.common import describe, is_dynamic, is_list, json_text
from converge.core.template.nodes import EvalContext, Function, resolve

_EXAMPLE = "{template: 'This is %var%', for_each: {'%var%': [a, b, c]}}"

# The most values one repeat may make (copies times the values in one copy). Heat bounds
# a repeat only by what it may store and send (a 1 MiB JSON body); a few lists of a few
# dozen items would otherwise ask for millions of copies and seconds of work before any
# size check could run. A quarter of a million values is about that megabyte.
MAX_REPEAT_VALUES = 250_000


def _value_count(value: Any) -> int:
    """Scalars plus collections in ``value`` (what one copy of the template costs)."""
    count = 0
    pending = [value]
    while pending:
        item = pending.pop()
        count += 1
        if isinstance(item, Mapping):
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            pending.extend(item)
    return count


def _substitute(value: Any, pairs: Sequence[tuple[str, str]]) -> Any:
    """Replace every loop variable in the strings (values and keys) of ``value``."""
    if isinstance(value, str):
        for variable, item in pairs:
            value = value.replace(variable, item)
        return value
    if isinstance(value, list | tuple):
        return [_substitute(element, pairs) for element in value]
    if isinstance(value, Mapping):
        return {_substitute(key, pairs): _substitute(item, pairs) for key, item in value.items()}
    return value


class Repeat(Function):
    """``repeat: {template: ..., for_each: {var: list}}`` — every combination of the lists.

    2016-10-14 adds maps as loop values (their keys are iterated); 2017-09-01 adds
    ``permutations: false`` to walk equally long lists side by side instead.
    """

    allow_maps: ClassVar[bool] = False
    allow_permutations_key: ClassVar[bool] = False

    def validate_args(self) -> None:
        args = self.args
        if not isinstance(args, Mapping) or "template" not in args or "for_each" not in args:
            raise self.where.error(f"repeat expects a map like {_EXAMPLE}")
        for_each = args["for_each"]
        if not (isinstance(for_each, Mapping) or is_dynamic(for_each)):
            raise self.where.error(
                f"repeat: 'for_each' must be a map of loop variables, not {describe(for_each)}"
            )
        if isinstance(for_each, Mapping):
            if not for_each:
                raise self.where.error("repeat: 'for_each' needs at least one loop variable")
            for variable in for_each:
                if not isinstance(variable, str) or not variable:
                    raise self.where.error(
                        f"repeat: loop variables must be non-empty strings, not {variable!r}"
                    )
        if "permutations" in args:
            if not self.allow_permutations_key:
                raise self.where.error(
                    "repeat: 'permutations' needs heat_template_version 2017-09-01 or later"
                )
            if not isinstance(args["permutations"], bool):
                raise self.where.error(
                    f"repeat: 'permutations' must be a boolean, not {args['permutations']!r}"
                )

    def resolve(self, ctx: EvalContext) -> Any:
        for_each = resolve(self.args["for_each"], ctx)
        permutations = self.args.get("permutations", True)
        if not isinstance(for_each, Mapping) or not for_each:
            raise self.where.error(
                f"repeat: 'for_each' must be a map of loop variables, not {describe(for_each)}"
            )
        variables: list[str] = []
        loops: list[list[str]] = []
        for variable, items in for_each.items():
            if not isinstance(variable, str) or not variable:
                raise self.where.error(
                    f"repeat: loop variables must be non-empty strings, not {variable!r}"
                )
            variables.append(variable)
            loops.append(self._items(variable, items, permutations))
        # Heat leaves null loops out of the length check (they make the result empty)
        lengths = {
            len(items)
            for items, raw in zip(loops, for_each.values(), strict=True)
            if raw is not None
        }
        if not permutations and len(lengths) > 1:
            raise self.where.error(
                "repeat: with 'permutations: false' the for_each lists must be equally long"
            )
        template = resolve(self.args["template"], ctx)
        copies = min(map(len, loops)) if not permutations else math.prod(map(len, loops))
        size = _value_count(template)
        if copies * size > MAX_REPEAT_VALUES:
            raise self.where.error(
                f"repeat would make {copies} copies of a template of {size} values, "
                f"{copies * size} values, more than the limit of {MAX_REPEAT_VALUES}; "
                "use shorter lists or fewer loop variables"
            )
        combine = itertools.product if permutations else zip
        return [
            _substitute(template, list(zip(variables, combination, strict=True)))
            for combination in combine(*loops)
        ]

    def _items(self, variable: str, items: Any, permutations: bool) -> list[str]:
        if items is None:
            return []
        maps_allowed = self.allow_maps and permutations
        if is_list(items) or (maps_allowed and isinstance(items, Mapping)):
            return [self._text(variable, item) for item in items]
        kinds = "lists or maps" if maps_allowed else "lists"
        raise self.where.error(
            f"repeat: the values of 'for_each' must be {kinds}; {variable!r} is {describe(items)}"
        )

    def _text(self, variable: str, item: Any) -> str:
        if isinstance(item, str):
            return item
        if isinstance(item, bool) or item is None or isinstance(item, Mapping | list | tuple):
            return json_text(item)
        if isinstance(item, int | float):
            return str(item)
        raise self.where.error(f"repeat: cannot substitute {describe(item)} for {variable!r}")


class RepeatWithMaps(Repeat):
    """``repeat`` from 2016-10-14: a map's keys may be looped over."""

    allow_maps = True


class RepeatWithPermutations(RepeatWithMaps):
    """``repeat`` from 2017-09-01: ``permutations: false`` zips the lists instead."""

    allow_permutations_key = True
