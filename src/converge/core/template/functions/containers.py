"""Map and list functions: map_merge, map_replace, list_concat(_unique), filter, contains."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from converge.core.template.functions.common import describe, is_dynamic, is_list
from converge.core.template.nodes import EvalContext, Function, resolve


class MapMerge(Function):
    """``map_merge: [map1, map2, ...]``: later maps win; null counts as an empty map."""

    def validate_args(self) -> None:
        if not (is_list(self.args) or is_dynamic(self.args)):
            raise self.where.error(
                f"map_merge expects a list of maps like [{{a: 1}}, {{b: 2}}], "
                f"not {describe(self.args)}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        maps = resolve(self.args, ctx)
        if not is_list(maps):
            raise self.where.error(f"map_merge expects a list of maps, not {describe(maps)}")
        merged: dict[Any, Any] = {}
        for item in maps:
            if item is None:
                continue
            if not isinstance(item, Mapping):
                raise self.where.error(
                    f"map_merge: items to merge must be maps, not {describe(item)}"
                )
            merged.update(item)
        return merged


class MapReplace(Function):
    """``map_replace: [map, {keys: {old: new}, values: {old: new}}]``."""

    _example = "[{k1: v1}, {keys: {k1: K1}, values: {v1: V1}}]"

    def validate_args(self) -> None:
        args = self.args
        if is_dynamic(args):
            return
        if not is_list(args) or len(args) != 2:
            raise self.where.error(f"map_replace expects a list like {self._example}")
        self._check_replacements(args[1])

    def _check_replacements(self, replacements: Any) -> None:
        if isinstance(replacements, Mapping):
            unknown = [key for key in replacements if key not in ("keys", "values")]
            if unknown:
                raise self.where.error(
                    f"map_replace: the replacement map may only hold 'keys' and 'values', "
                    f"not {', '.join(map(str, unknown))}"
                )

    def _map(self, value: Any, what: str) -> Mapping[Any, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.where.error(f"map_replace: {what} must be a map, not {describe(value)}")
        return value

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if not is_list(args) or len(args) != 2:
            raise self.where.error(f"map_replace expects a list like {self._example}")
        source = self._map(args[0], "the input")
        replacements = self._map(args[1], "the replacement")
        self._check_replacements(replacements)
        new_keys = self._map(replacements.get("keys"), "'keys'")
        new_values = self._map(replacements.get("values"), "'values'")
        result: dict[Any, Any] = {}
        for key, value in source.items():
            new_key = new_keys.get(key)
            if new_key is None:
                new_key = key
            elif new_key != key and new_key in source:
                raise self.where.error(
                    f"map_replace: key replacement {new_key!r} collides with a key in the input map"
                )
            elif new_key in result:
                raise self.where.error(
                    f"map_replace: key replacement {new_key!r} collides with a key "
                    f"in the output map"
                )
            try:
                result[new_key] = new_values.get(value, value)
            except TypeError:  # an unhashable value (list, map) is never replaced
                result[new_key] = value
        return result


class ListConcat(Function):
    """``list_concat: [list1, list2, ...]``; null counts as an empty list."""

    unique: ClassVar[bool] = False

    def validate_args(self) -> None:
        if not (is_list(self.args) or is_dynamic(self.args)):
            raise self.where.error(
                f"{self.fn_name} expects a list of lists like [[a, b], [c]], "
                f"not {describe(self.args)}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        lists = resolve(self.args, ctx)
        if not is_list(lists):
            raise self.where.error(f"{self.fn_name} expects a list of lists, not {describe(lists)}")
        result: list[Any] = []
        for item in lists:
            if item is None:
                continue
            if not is_list(item):
                raise self.where.error(
                    f"{self.fn_name}: items to concatenate must be lists, not {describe(item)}"
                )
            result.extend(item)
        return _last_occurrences(result) if self.unique else result


def _last_occurrences(items: list[Any]) -> list[Any]:
    """Drop duplicates keeping each value's last occurrence, as Heat does (== equality)."""
    try:
        seen: set[Any] = set()
        kept: list[Any] = []
        for item in reversed(items):
            if item not in seen:
                seen.add(item)
                kept.append(item)
        kept.reverse()
        return kept
    except TypeError:  # maps or lists among the items: compare pairwise
        return [item for index, item in enumerate(items) if item not in items[index + 1 :]]


class ListConcatUnique(ListConcat):
    """``list_concat_unique``: ``list_concat`` without duplicate items."""

    unique = True


class Filter(Function):
    """``filter: [values_to_remove, list]``."""

    def validate_args(self) -> None:
        if is_dynamic(self.args):
            return
        if not is_list(self.args) or len(self.args) != 2:
            raise self.where.error("filter expects a list [<values to remove>, <list>]")

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if not is_list(args) or len(args) != 2:
            raise self.where.error("filter expects a list [<values to remove>, <list>]")
        values, sequence = args
        if not sequence:
            return sequence
        if not is_list(sequence):
            raise self.where.error(f"filter only works on lists, not {describe(sequence)}")
        if not values:
            return list(sequence)
        if not is_list(values):
            raise self.where.error(
                f"filter: the values to remove must be a list, not {describe(values)}"
            )
        return [item for item in sequence if item not in values]


class Contains(Function):
    """``contains: [value, sequence]``: whether the value is in the list (or string)."""

    def validate_args(self) -> None:
        if is_dynamic(self.args):
            return
        if not is_list(self.args) or len(self.args) != 2:
            raise self.where.error("contains expects a list [<value>, <list>]")

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if not is_list(args) or len(args) != 2:
            raise self.where.error("contains expects a list [<value>, <list>]")
        value, sequence = args
        if isinstance(sequence, str):
            # Heat treats a string as a sequence of characters: substring test
            return isinstance(value, str) and value in sequence
        if not is_list(sequence):
            raise self.where.error(
                f"contains: the second argument must be a list, not {describe(sequence)}"
            )
        return value in sequence
