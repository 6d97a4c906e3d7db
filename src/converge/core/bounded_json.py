"""JSON text inside templates (a ``json`` parameter's value, ``Fn::Select``'s collection),
read with the same depth and size limits as a template document.

``json.loads`` alone raises ``RecursionError`` on ``[[[[…]]]]`` nested 100,000 deep, and
anything it did return that deep would overflow the recursive evaluation further on.
"""

from __future__ import annotations

import json
from typing import Any

MAX_DEPTH = 100  # as the template loader's Limits.max_depth
MAX_VALUES = 2_000_000  # as the template loader's Limits.max_nodes


def parse_json(text: str, *, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> Any:
    """``text`` as JSON data; ``ValueError`` saying what is wrong with invalid or oversized text."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise ValueError(f"nesting is deeper than {max_depth} levels") from None
    count = 0
    pending: list[tuple[Any, int]] = [(data, 1)]
    while pending:
        value, depth = pending.pop()
        count += 1
        if count > max_values:
            raise ValueError(f"more than {max_values} values")
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > max_depth:
            raise ValueError(f"nesting is deeper than {max_depth} levels")
        pending.extend((child, depth + 1) for child in children)
    return data
