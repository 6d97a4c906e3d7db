"""Short unified diffs of text, for showing how a file's content drifted (pure)."""

from __future__ import annotations

import difflib

# Enough to see what changed in a page or a config file; a whole rewritten file is cut.
MAX_LINES = 40
MAX_CHARS = 4000


def short_unified_diff(
    wanted: str, found: str, *, max_lines: int = MAX_LINES, max_chars: int = MAX_CHARS
) -> str:
    """A unified diff from ``wanted`` to ``found`` (``-`` wanted, ``+`` found), cut to
    ``max_lines`` lines and ``max_chars`` characters with a note saying how much was left
    out; "" when they are equal. Purely computational."""
    lines = list(
        difflib.unified_diff(
            wanted.splitlines(),
            found.splitlines(),
            fromfile="wanted",
            tofile="found",
            lineterm="",
        )
    )
    if not lines:
        return ""
    shown: list[str] = []
    size = 0
    for line in lines:
        if len(shown) == max_lines or size + len(line) + 1 > max_chars:
            break
        shown.append(line)
        size += len(line) + 1
    left = len(lines) - len(shown)
    if left:
        shown.append(f"… ({left} more diff line{'s' if left != 1 else ''} not shown)")
    return "\n".join(shown)
