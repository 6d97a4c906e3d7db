"""Reading the JSON that the store and the bus wrote: orjson where it can, else the stdlib.

Every resource check decodes a dozen small JSON columns; orjson does that several times
faster than ``json.loads``. What orjson refuses (``NaN`` and ``Infinity``, which Python's
``json.dumps`` writes and Heat's templates can hold) is read by ``json.loads``, so values
round-trip exactly as before. So is any text with a run of 19 digits or more: orjson
reads an integer beyond 64 bits as a float, silently, where ``json.loads`` keeps it exact.
Writing stays ``json.dumps``: orjson would turn NaN into null and refuse integers beyond
64 bits. Most JSON columns are written empty: those get their text without the encoder.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

# An integer orjson may not hold (|n| >= 2**63 has 19 digits or more); a long fraction
# matches too and is merely read the slower way.
_LONG_NUMBER = re.compile(r"\d{19}")
_LONG_NUMBER_BYTES = re.compile(rb"\d{19}")


def loads(text: str | bytes) -> Any:
    found = (
        _LONG_NUMBER_BYTES.search(text) if isinstance(text, bytes) else _LONG_NUMBER.search(text)
    )
    if found is not None:
        return json.loads(text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


_EMPTY: dict[type, str] = {type(None): "null", dict: "{}", list: "[]"}


def dumps(value: Any) -> str:
    """``json.dumps(value)``; an empty dict or list and None without the encoder (a create's
    1,000 rows have 7,000 JSON columns, nearly all empty)."""
    empty = None if value else _EMPTY.get(type(value))
    return json.dumps(value) if empty is None else empty
