"""Confinement of local paths to the allowed roots, file modes, and ownership markers.

Templates are code: a path is allowed only when, with ``..`` and symlinks resolved, it lies
strictly inside one of the configured roots (never a root itself, which holds the state).
A relative path is taken relative to the first root (the CLI's: the state file's directory).

What converge makes on disk carries a marker in extended attributes naming the resource row
that made it (its physical name) and the logical resource (stack id and resource name), so an
interrupted create adopts its own work and a cleanup never deletes what a replacement adopted.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from converge.resources.base import ResourceContext

_MODE = re.compile(r"[0-7]{3,4}")
ROW_ATTR = "user.converge.row"
OWNER_ATTR = "user.converge.owner"


class ConfinementError(ValueError):
    """A path outside the allowed roots, or no roots configured at all."""


def confine(raw: str, roots: Sequence[Path], *, allow_root: bool = False) -> Path:
    """The real absolute path for ``raw``, or ``ConfinementError`` naming the roots."""
    if not roots:
        raise ConfinementError(
            "no allowed roots are configured, so Local types may not touch the filesystem"
        )
    if not isinstance(raw, str) or not raw:
        raise ConfinementError("expected a non-empty path")
    if "\0" in raw:
        raise ConfinementError("a path may not contain a NUL character")
    real_roots = [Path(os.path.realpath(root)) for root in roots]
    candidate = Path(raw).expanduser()
    if not candidate.is_absolute():
        candidate = real_roots[0] / candidate
    real = Path(os.path.realpath(candidate))
    for root in real_roots:
        if real == root and allow_root:
            return real
        if root in real.parents:
            return real
    shown = ", ".join(str(root) for root in real_roots)
    if real in real_roots:
        raise ConfinementError(f"{raw!r} is an allowed root itself ({real}); use a path inside it")
    resolved = "" if str(real) == raw else f" resolves to {real}, which"
    raise ConfinementError(f"{raw!r}{resolved} is outside the allowed roots ({shown})")


def parse_mode(value: Any) -> int:
    """A permission mode from its quoted octal spelling (``"0644"``)."""
    if isinstance(value, str) and _MODE.fullmatch(value):
        return int(value, 8)
    if isinstance(value, int) and not isinstance(value, bool):
        raise ValueError(
            f"write the mode as a quoted octal string such as '0644' (got the number {value}; "
            "YAML reads an unquoted 0644 as the number 420)"
        )
    raise ValueError(f"expected an octal mode such as '0644', got {value!r}")


def shown_mode(live: int, applied: Any) -> str:
    """The live mode in the applied spelling when they agree (so equal reads as equal)."""
    try:
        if parse_mode(applied) == live:
            return str(applied)
    except ValueError:
        pass
    return f"{live:04o}"


def owner_of(ctx: ResourceContext) -> str:
    """The logical resource, the same for every row (replacement) of one template resource."""
    return f"{ctx.stack_id}/{ctx.resource_name}"


def read_marker(path: Path, name: str) -> str | None:
    """A marker attribute of ``path``; None when absent or unsupported by the filesystem."""
    try:
        return os.getxattr(path, name, follow_symlinks=False).decode("utf-8", "replace")
    except OSError:
        return None


def write_markers(path: Path, ctx: ResourceContext) -> None:
    """Mark ``path`` as made by this row; a filesystem without user xattrs goes unmarked."""
    for name, value in ((ROW_ATTR, ctx.physical_name), (OWNER_ATTR, owner_of(ctx))):
        try:
            os.setxattr(path, name, value.encode(), follow_symlinks=False)
        except OSError as exc:
            if exc.errno not in (errno.ENOTSUP, errno.EPERM, errno.EOPNOTSUPP):
                raise
            return


def is_ours(path: Path, ctx: ResourceContext) -> bool:
    """Made by this logical resource (this row or an earlier one of the same name)."""
    return read_marker(path, OWNER_ATTR) == owner_of(ctx)


def may_delete(path: Path, ctx: ResourceContext, recorded: bool) -> bool:
    """Whether this row's cleanup may remove ``path``.

    A thing marked by another row was adopted by a replacement: leave it. An unmarked one
    (marker lost or unsupported) is removed only if this row recorded making it.
    """
    row = read_marker(path, ROW_ATTR)
    if row is None:
        return recorded
    return row == ctx.physical_name
