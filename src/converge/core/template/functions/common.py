"""Small helpers shared by the intrinsic functions: argument shapes, type names, JSON text."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from converge.core.schema import type_word
from converge.core.template.nodes import Function


def describe(value: Any) -> str:
    """A template author's word for a value's type, for error messages."""
    if isinstance(value, Function):
        return f"a {value.fn_name} call"
    return type_word(value)


def is_list(value: Any) -> bool:
    return isinstance(value, list | tuple)


# Plain YAML/JSON types, tested first because isinstance against the Function ABC is slow
_PLAIN_TYPES = frozenset({str, int, float, bool, type(None), list, dict})


def is_dynamic(value: Any) -> bool:
    """True for a function call, whose shape is only known once it is evaluated."""
    return type(value) not in _PLAIN_TYPES and isinstance(value, Function)


def json_text(value: Any) -> str:
    """Heat's serialisation of maps and lists substituted into strings (sorted keys)."""
    return json.dumps(value, sort_keys=True)


def walk_path(value: Any, path: list[Any] | tuple[Any, ...], *, numeric_strings: bool) -> Any:
    """Follow ``path`` into nested maps and lists; raises LookupError/TypeError when it can't.

    ``numeric_strings``: a string key on a list is read as an index (get_param does this,
    get_attr does not).
    """
    for key in path:
        if isinstance(value, Mapping):
            if not isinstance(key, str | int) or isinstance(key, bool):
                raise TypeError(f"path component {key!r} must be a string or an integer")
            value = value[key]
        elif isinstance(value, list | tuple | str):
            if isinstance(key, str) and numeric_strings:
                key = int(key)  # ValueError is a LookupError's cousin: callers catch both
            if not isinstance(key, int) or isinstance(key, bool):
                raise TypeError(f"path component {key!r} must be an integer to index a list")
            value = value[key]
        else:
            raise TypeError(f"cannot follow path component {key!r} into {describe(value)}")
    return value
