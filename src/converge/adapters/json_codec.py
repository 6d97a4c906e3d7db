"""Reading the JSON that the store and the bus wrote: orjson where it can, else the stdlib.

Every resource check decodes a dozen small JSON columns; orjson does that several times
faster than ``json.loads``. What orjson refuses (``NaN`` and ``Infinity``, which Python's
``json.dumps`` writes and Heat's templates can hold) is read by ``json.loads``, so values
round-trip exactly as before. Writing stays ``json.dumps``: orjson would turn NaN into
null and refuse integers beyond 64 bits.
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def loads(text: str | bytes) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


dumps = json.dumps
