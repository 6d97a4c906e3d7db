"""Values that must never be shown: those of hidden parameters, wherever they flow.

A hidden parameter's value can reach any property (``get_param``, ``str_replace``,
``list_join`` …), where a validation message would quote it. Values are not tagged as they
flow, so what is hidden is recognised by its text: a value is concealed when it is a hidden
parameter's value, or contains one that is a string of four characters or more. Messages say
"a hidden value" instead. Purely computational.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SHOWN_AS = "a hidden value"
# Shorter secrets are matched whole only: "ab" inside "table" is not worth hiding it for.
MIN_CONTAINED = 4


def _texts(value: Any) -> Iterable[tuple[str, bool]]:
    """Every scalar inside ``value`` as text, and whether it was a string."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, bool):
        yield ("true" if value else "false"), False
    elif isinstance(value, int | float):
        yield str(value), False
    elif isinstance(value, str):
        yield value, True


@dataclass(frozen=True)
class HiddenValues:
    """The texts of a stack's hidden parameter values."""

    whole: frozenset[str] = frozenset()  # matched as a whole value
    # Matched inside longer text too: strings long enough not to turn up by chance
    # (numbers and booleans never are).
    contained: frozenset[str] = frozenset()

    @classmethod
    def of(cls, values: Iterable[Any]) -> HiddenValues:
        texts = [text for value in values for text in _texts(value) if text[0].strip()]
        return cls(
            frozenset(text for text, _ in texts),
            frozenset(
                text for text, is_string in texts if is_string and len(text) >= MIN_CONTAINED
            ),
        )

    def conceals(self, value: Any) -> bool:
        """Whether ``value`` (or anything inside it) shows a hidden value."""
        if not self.whole:
            return False
        for text, _ in _texts(value):
            if text in self.whole or any(secret in text for secret in self.contained):
                return True
        return False

    def scrub(self, message: str) -> str:
        """``message`` with every hidden value in it replaced by "a hidden value"."""
        for secret in sorted(self.contained, key=len, reverse=True):
            message = message.replace(repr(secret), SHOWN_AS).replace(secret, SHOWN_AS)
        return message


NOTHING_HIDDEN = HiddenValues()
