"""String functions: str_replace (and its strict forms), list_join, str_split, digest."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, ClassVar

from converge.core.template.functions.common import describe, is_dynamic, is_list, json_text
from converge.core.template.nodes import EvalContext, Function, resolve

_STR_REPLACE_EXAMPLE = "{template: 'Hello NAME', params: {NAME: world}}"


def replace_placeholders(
    template: str, params: Mapping[str, str], found: set[str] | None = None
) -> str:
    """Heat's substitution: longest placeholder first (then alphabetical), values not rescanned.

    Each placeholder splits the text that no earlier placeholder replaced, so a value put in
    is never searched again and a longer placeholder wins over one it contains.
    """
    keys = sorted(sorted(params), key=len, reverse=True)
    segments: list[tuple[bool, str]] = [(True, template)]  # (still to scan, text)
    for key in keys:
        if not any(scan and key in text for scan, text in segments):
            continue
        if found is not None:
            found.add(key)
        value = params[key]
        replaced: list[tuple[bool, str]] = []
        for scan, text in segments:
            if not scan or key not in text:
                replaced.append((scan, text))
                continue
            for index, piece in enumerate(text.split(key)):
                if index:
                    replaced.append((False, value))
                if piece:
                    replaced.append((True, piece))
        segments = replaced
    return "".join(text for _, text in segments)


class StrReplace(Function):
    """``str_replace: {template: ..., params: {placeholder: value}}``.

    Before 2015-10-15 values must be strings or numbers; from then on maps and lists are
    JSON-encoded (sorted keys).
    """

    encode_json: ClassVar[bool] = False
    strict: ClassVar[bool] = False  # every placeholder must occur in the template
    allow_empty: ClassVar[bool] = True  # null or empty values allowed

    def validate_args(self) -> None:
        args = self.args
        if not isinstance(args, Mapping) or "template" not in args or "params" not in args:
            raise self.where.error(
                f"{self.fn_name} expects a map with 'template' and 'params', "
                f"e.g. {_STR_REPLACE_EXAMPLE}"
            )
        params = args["params"]
        if isinstance(params, Mapping):
            self._check_placeholders(params)
        elif not is_dynamic(params):
            raise self.where.error(
                f"{self.fn_name}: 'params' must be a map, not {describe(params)}"
            )
        template = args["template"]
        if not (isinstance(template, str) or is_dynamic(template)):
            raise self.where.error(
                f"{self.fn_name}: 'template' must be a string, not {describe(template)}"
            )

    def _check_placeholders(self, params: Mapping[Any, Any]) -> None:
        for key in params:
            if not isinstance(key, str):
                raise self.where.error(
                    f"{self.fn_name}: placeholders in 'params' must be strings, not {key!r}"
                )
            if not key:
                raise self.where.error(f"{self.fn_name}: a placeholder must not be empty")

    def _text(self, key: str, value: Any) -> str:
        if value is None:
            if not self.allow_empty:
                raise self._empty_error(key)
            return ""
        if isinstance(value, str | int | float):  # bool is an int: str(True) == "True" in Heat
            text = str(value)
        elif self.encode_json and isinstance(value, Mapping | list | tuple):
            if not value and not self.allow_empty:
                raise self._empty_error(key)
            text = json_text(value)
        elif self.encode_json:
            raise self.where.error(
                f"{self.fn_name}: the value of {key!r} must be a string, number, list or map, "
                f"not {describe(value)}"
            )
        else:
            raise self.where.error(
                f"{self.fn_name}: the value of {key!r} must be a string or a number, not "
                f"{describe(value)} (maps and lists are JSON-encoded from "
                f"heat_template_version 2015-10-15 on)"
            )
        if not text and not self.allow_empty:
            raise self._empty_error(key)
        return text

    def _empty_error(self, key: str) -> Exception:
        return self.where.error(
            f"{self.fn_name}: the value of {key!r} is null or empty; it must be a non-empty value"
        )

    def resolve(self, ctx: EvalContext) -> Any:
        template = resolve(self.args["template"], ctx)
        params = resolve(self.args["params"], ctx)
        if not isinstance(template, str):
            raise self.where.error(
                f"{self.fn_name}: 'template' must be a string, not {describe(template)}"
            )
        if not isinstance(params, Mapping):
            raise self.where.error(
                f"{self.fn_name}: 'params' must be a map, not {describe(params)}"
            )
        self._check_placeholders(params)
        texts = {key: self._text(key, value) for key, value in params.items()}
        found: set[str] = set()
        result = replace_placeholders(template, texts, found)
        if self.strict and len(found) < len(texts):
            missing = sorted(sorted(set(texts) - found), key=len, reverse=True)
            raise self.where.error(
                f"{self.fn_name}: these params were not found in the template: "
                + ", ".join(missing)
            )
        return result


class StrReplaceJson(StrReplace):
    """``str_replace`` from 2015-10-15: maps and lists are JSON-encoded."""

    encode_json = True


class StrReplaceStrict(StrReplaceJson):
    """``str_replace_strict`` (2017-02-24): every param must occur in the template."""

    strict = True


class StrReplaceVeryStrict(StrReplaceStrict):
    """``str_replace_vstrict`` (2017-09-01): strict, and no null or empty values either."""

    allow_empty = False


class ListJoin(Function):
    """``list_join: [delimiter, [items...]]``; items must be strings (null joins as "")."""

    multiple_lists: ClassVar[bool] = False

    def validate_args(self) -> None:
        args = self.args
        example = "[', ', [one, two]" + (", [three]...]" if self.multiple_lists else "]")
        if not is_list(args):
            raise self.where.error(f"list_join expects a list like {example}")
        if (self.multiple_lists and len(args) < 2) or (not self.multiple_lists and len(args) != 2):
            raise self.where.error(f"list_join expects a list like {example}")
        delimiter = args[0]
        if not (isinstance(delimiter, str) or is_dynamic(delimiter)):
            raise self.where.error(
                f"list_join: the delimiter must be a string, not {describe(delimiter)}"
            )

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        delimiter = args[0]
        if not isinstance(delimiter, str):
            raise self.where.error(
                f"list_join: the delimiter must be a string, not {describe(delimiter)}"
            )
        items: list[Any] = []
        for value in args[1:]:
            if value is None or (self.multiple_lists and not value):
                continue
            if not is_list(value):
                raise self.where.error(f"list_join must operate on lists, not {describe(value)}")
            items.extend(value)
        return delimiter.join(self._text(item) for item in items)

    def _text(self, item: Any) -> str:
        if item is None:
            return ""
        if isinstance(item, str):
            return item
        if self.multiple_lists and isinstance(item, Mapping | list | tuple):
            return json_text(item)
        allowed = "strings, maps or lists" if self.multiple_lists else "strings"
        raise self.where.error(
            f"list_join: items to join must be {allowed}, not {describe(item)} ({item!r:.200})"
        )


class ListJoinMultiple(ListJoin):
    """``list_join`` from 2015-10-15: several lists; maps and lists are JSON-encoded."""

    multiple_lists = True


class StrSplit(Function):
    """``str_split: [delimiter, string]`` or ``[delimiter, string, index]``."""

    _example = "[',', 'apples,pears', <index>]"

    def validate_args(self) -> None:
        args = self.args
        if is_dynamic(args):
            return
        if not is_list(args) or len(args) not in (2, 3):
            raise self.where.error(f"str_split expects a list like {self._example}")

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if not is_list(args) or len(args) not in (2, 3):
            raise self.where.error(f"str_split expects a list like {self._example}")
        delimiter, text = args[0], args[1]
        if text is None:
            return None
        if not isinstance(delimiter, str) or not delimiter:
            raise self.where.error(
                f"str_split: the delimiter must be a non-empty string, not {delimiter!r}"
            )
        if not isinstance(text, str):
            raise self.where.error(f"str_split can only split a string, not {describe(text)}")
        parts = text.split(delimiter)
        if len(args) == 2:
            return parts
        try:
            index = int(args[2])
        except (TypeError, ValueError):
            raise self.where.error(
                f"str_split: the index must be an integer, not {args[2]!r}"
            ) from None
        if not -len(parts) <= index < len(parts):
            raise self.where.error(
                f"str_split: index {index} is out of range; it must be between 0 and "
                f"{len(parts) - 1}"
            )
        return parts[index]


def _algorithms() -> frozenset[str]:
    # shake_* need a length to give a digest: not usable in a template
    return frozenset(
        name.lower() for name in hashlib.algorithms_available if not name.startswith("shake")
    )


_ALGORITHMS = _algorithms()


class Digest(Function):
    """``digest: [algorithm, value]``: the hex digest of the value's UTF-8 bytes."""

    def validate_args(self) -> None:
        args = self.args
        if is_dynamic(args):
            return
        if not is_list(args) or len(args) != 2:
            raise self.where.error("digest expects a list [<algorithm>, <value>]")
        if isinstance(args[0], str):
            self._check_algorithm(args[0])

    def _check_algorithm(self, algorithm: Any) -> str:
        if not isinstance(algorithm, str) or algorithm.lower() not in _ALGORITHMS:
            raise self.where.error(
                f"digest: unknown algorithm {algorithm!r}; use one of "
                + ", ".join(sorted(_ALGORITHMS))
            )
        return algorithm.lower()

    def resolve(self, ctx: EvalContext) -> Any:
        args = resolve(self.args, ctx)
        if not is_list(args) or len(args) != 2:
            raise self.where.error("digest expects a list [<algorithm>, <value>]")
        algorithm = self._check_algorithm(args[0])
        value = args[1]
        if not isinstance(value, str):
            raise self.where.error(f"digest: the value must be a string, not {describe(value)}")
        return hashlib.new(algorithm, value.encode()).hexdigest()
