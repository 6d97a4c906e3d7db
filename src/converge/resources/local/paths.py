"""Confinement of local paths to the allowed roots, file modes, and ownership markers.

Templates are code: a path is allowed only when, with ``..`` and symlinks resolved, it lies
strictly inside one of the configured roots (never a root itself, which holds the state).
A relative path is taken relative to the first root (the CLI's: the state file's directory).

What converge makes on disk carries a marker in extended attributes naming the resource row
that made it (its physical name) and the logical resource (stack id and resource name), so an
interrupted create takes up its own work and a cleanup never deletes what a replacement took
up. Anything else already at a path is refused unless the template says ``adopt: true``;
what was adopted is marked so, and its delete hands it back instead of removing it.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from converge.errors import PermanentFailure
from converge.resources.base import ResourceContext

_MODE = re.compile(r"[0-7]{3,4}")
ROW_ATTR = "user.converge.row"
OWNER_ATTR = "user.converge.owner"
# Present on what existed before converge managed it (``adopt: true``): delete leaves it.
ADOPTED_ATTR = "user.converge.adopted"
ADOPT_DESCRIPTION = (
    "Manage a {kind} that already exists at the path and was not made by converge (otherwise "
    "creating over it fails). An adopted {kind} is marked as adopted and left in place on "
    "delete, whatever the deletion_policy; one that did not exist is made and owned as usual."
)
_UNSUPPORTED = (errno.ENOTSUP, errno.EPERM, errno.EOPNOTSUPP)


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
    try:
        real = Path(os.path.realpath(candidate))
    except OSError as exc:  # a component changed kind while it was being resolved
        raise ConfinementError(f"{raw!r} cannot be resolved: {exc.strerror}") from None
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


def read_marker(fd: int, name: str) -> str | None:
    """A marker attribute of the open file or directory ``fd``; None when absent or the
    filesystem has no user attributes."""
    try:
        return os.getxattr(fd, name).decode("utf-8", "replace")
    except OSError:
        return None


def write_markers(fd: int, ctx: ResourceContext, *, adopted: bool) -> None:
    """Mark the open ``fd`` as this row's (and as adopted, when it was there before);
    a filesystem without user xattrs goes unmarked."""
    markers = [(ROW_ATTR, ctx.physical_name), (OWNER_ATTR, owner_of(ctx))]
    if adopted:
        markers.append((ADOPTED_ATTR, owner_of(ctx)))
    try:
        for name, value in markers:
            os.setxattr(fd, name, value.encode())
        if not adopted:
            _remove_attribute(fd, ADOPTED_ATTR)
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED:
            raise


def remove_markers(fd: int) -> None:
    """Hand the open ``fd`` back: converge no longer claims it (an adopted thing on delete)."""
    for name in (ROW_ATTR, OWNER_ATTR, ADOPTED_ATTR):
        try:
            _remove_attribute(fd, name)
        except OSError as exc:
            if exc.errno not in _UNSUPPORTED:
                raise


def _remove_attribute(fd: int, name: str) -> None:
    try:
        os.removexattr(fd, name)
    except OSError as exc:
        if exc.errno != errno.ENODATA:
            raise


def is_ours(fd: int, ctx: ResourceContext) -> bool:
    """Made (or adopted) by this logical resource: this row or an earlier one of the name."""
    return read_marker(fd, OWNER_ATTR) == owner_of(ctx)


def is_adopted(fd: int, ctx: ResourceContext) -> bool:
    """Adopted by this logical resource: it existed before converge managed it."""
    return read_marker(fd, ADOPTED_ATTR) == owner_of(ctx)


def refuse_takeover(ctx: ResourceContext, path: Path, kind: str) -> PermanentFailure:
    """The error for an existing thing that carries no marker of this resource."""
    return PermanentFailure(
        f"{ctx.resource_name}: {path} already exists and was not made by converge for this "
        f"resource (stack {ctx.stack_id}, resource {ctx.resource_name}); converge does not "
        f"take over an existing {kind}: set 'adopt: true' to manage it (an adopted {kind} is "
        "left in place on delete), or choose another path"
    )


def may_delete(fd: int, ctx: ResourceContext, recorded: bool) -> bool:
    """Whether this row's cleanup may remove the open ``fd``.

    A thing marked by another row was adopted by a replacement: leave it. An unmarked one
    (marker lost or unsupported) is removed only if this row recorded making it.
    """
    row = read_marker(fd, ROW_ATTR)
    if row is None:
        return recorded
    return row == ctx.physical_name
