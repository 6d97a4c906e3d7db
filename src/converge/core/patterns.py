"""Template authors' regular expressions (``allowed_pattern``), matched in linear time.

Python's ``re`` backtracks: ``(a+)+$`` against 30 ``a``s and a ``!`` takes minutes, so a
template could stall whoever validates it. RE2 never backtracks; what it cannot do in
linear time (backreferences, look-around) it refuses, and so does this module, with a
message that says why.
"""

from __future__ import annotations

import functools
from typing import Any

_REFUSED = (
    "converge matches patterns with RE2, which runs in linear time and has no "
    "backreferences or look-around"
)


class PatternError(ValueError):
    """A pattern that cannot be used, with the reason."""


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2 (cached: the same constraint checks many values)."""
    import re2  # imported on first use: the CLI's start time does not pay for it

    options = re2.Options()
    options.log_errors = False  # the reason goes into our message, not to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(f"{reason} ({_REFUSED})") from None


def matches_whole(pattern: str, text: str) -> bool:
    """Heat's rule: the pattern matches at the start and the match covers all of ``text``."""
    match = compile_pattern(pattern).match(text)
    return match is not None and match.end() == len(text)
