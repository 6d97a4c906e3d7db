"""Local::Directory: a directory under the allowed roots, with its permission mode.

Create makes missing parents too and takes up a directory already there only when it carries
this resource's marker (an interrupted create) or the template says ``adopt: true``; any
other existing directory is refused. Delete removes it only when empty unless
``purge_on_delete`` says to remove its content (never following a symlink inside); an
adopted directory is left in place with its content (unless the template writes
``deletion_policy: Delete``); already gone is success. Every step
goes through directory descriptors opened from the root down (``confined``).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

from converge.core.schema import AttributeSchema, PropertySchema, PropertyType
from converge.errors import PermanentFailure
from converge.resources.base import (
    AppliedState,
    Outcome,
    ResourceContext,
    ResourcePlugin,
    ValidationContext,
)
from converge.resources.blocking import in_thread
from converge.resources.local.confined import (
    Location,
    is_symlink,
    locate,
    locate_recorded,
    lstat_at,
    open_subdirectory,
    opened_parent,
    purge,
)
from converge.resources.local.paths import (
    ADOPT_DESCRIPTION,
    OWNER_ATTR,
    ConfinementError,
    confine,
    is_adopted,
    is_ours,
    may_delete,
    parse_mode,
    read_marker,
    refuse_takeover,
    remove_markers,
    shown_mode,
    write_markers,
)


class LocalDirectory(ResourcePlugin):
    type_name = "Local::Directory"
    bound_to_host = True
    description = "A directory on this machine, inside the allowed roots."
    properties_schema = {
        "path": PropertySchema(
            PropertyType.STRING,
            "The directory; a relative path is taken from the first allowed root.",
            required=True,
        ),
        "mode": PropertySchema(
            PropertyType.ANY,
            "Permission bits as a quoted octal string.",
            default="0755",
            update_allowed=True,
        ),
        "purge_on_delete": PropertySchema(
            PropertyType.BOOLEAN,
            "Remove the directory's content on delete (otherwise only an empty one is removed).",
            default=False,
            update_allowed=True,
        ),
        "adopt": PropertySchema(
            PropertyType.BOOLEAN,
            ADOPT_DESCRIPTION.format(kind="directory"),
            default=False,
            update_allowed=True,
        ),
    }
    attributes_schema = {
        "path": AttributeSchema("The absolute path of the directory.", PropertyType.STRING),
    }

    def validate(
        self, properties: Mapping[str, Any], ctx: ValidationContext
    ) -> Iterable[tuple[str, str]]:
        return validate_path_and_mode(properties, ctx.allowed_roots)

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        return await self._make(ctx, properties, creating=True)

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        return await self._make(ctx, properties, creating=False)

    async def _make(
        self, ctx: ResourceContext, properties: Mapping[str, Any], *, creating: bool
    ) -> Outcome:
        location, mode = checked(ctx, properties)
        adopt = bool(properties.get("adopt"))
        adopted = await in_thread(_make, location, mode, ctx, creating=creating, adopt=adopt)
        return Outcome(str(location.path), {"path": str(location.path), "adopted": adopted})

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        location = located(ctx, current)
        if location is None:
            return
        purge_content = bool(current.properties.get("purge_on_delete"))
        await in_thread(_remove, location, purge_content, ctx, current)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        location = located(ctx, current)
        if location is None:
            return None
        info = await in_thread(_observe, location)
        if info is None:
            return None
        return {
            **current.properties,
            "mode": shown_mode(stat.S_IMODE(info.st_mode), current.properties.get("mode")),
        }

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        return {"mode": _canonical_mode(live.get("mode"))}

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        return {"path": current.physical_id} if "path" in names else {}

    def watch(self, ctx: Any, managed: Mapping[str, AppliedState]) -> Any:
        from converge.resources.local.watch import PathWatcher  # inotify: only when watching

        return PathWatcher(managed).changes()


def validate_path_and_mode(
    properties: Mapping[str, Any], roots: tuple[Path, ...]
) -> list[tuple[str, str]]:
    """Problems with the static ``path`` and ``mode`` values (shared by File)."""
    problems: list[tuple[str, str]] = []
    if isinstance(properties.get("path"), str):
        try:
            confine(properties["path"], roots)
        except ConfinementError as exc:
            problems.append(("path", str(exc)))
    if properties.get("mode") is not None:
        try:
            parse_mode(properties["mode"])
        except ValueError as exc:
            problems.append(("mode", str(exc)))
    return problems


def checked(ctx: ResourceContext, properties: Mapping[str, Any]) -> tuple[Location, int]:
    """The confined location and the mode, checked again at action time (values may be late)."""
    try:
        location = locate(properties["path"], ctx.allowed_roots)
        mode = parse_mode(properties.get("mode"))
    except (ConfinementError, ValueError) as exc:
        raise PermanentFailure(f"{ctx.resource_name}: {exc}") from None
    return location, mode


def located(ctx: ResourceContext, current: AppliedState) -> Location | None:
    """Where the thing is: the recorded path (taken literally), else (interrupted create) the
    configured one; None when neither lies inside the allowed roots."""
    try:
        if current.physical_id:
            return locate_recorded(current.physical_id, ctx.allowed_roots)
        raw = current.properties.get("path")
        return locate(str(raw), ctx.allowed_roots) if raw else None
    except ConfinementError:
        return None


def _canonical_mode(value: Any) -> str | None:
    try:
        return f"{parse_mode(value):04o}"
    except ValueError:
        return None


def _make(
    location: Location, mode: int, ctx: ResourceContext, *, creating: bool, adopt: bool
) -> bool:
    """Make (or take up) the directory through descriptors; whether it is an adopted one."""
    path = location.path
    try:
        with opened_parent(location, create=True) as parent:
            try:
                os.mkdir(location.name, mode, dir_fd=parent)
                made = True
            except FileExistsError:
                made = False
            fd = open_subdirectory(parent, location.name)
            if fd is None:
                if is_symlink(parent, location.name):
                    raise PermanentFailure(
                        f"{ctx.resource_name}: {path} is a symlink; converge follows no "
                        "symlink below an allowed root"
                    )
                raise PermanentFailure(f"{ctx.resource_name}: {path} exists and is not a directory")
            try:
                adopted = False if made else _claim(fd, ctx, path, creating=creating, adopt=adopt)
                os.fchmod(fd, mode)
                write_markers(fd, ctx, adopted=adopted)
            finally:
                os.close(fd)
            return adopted
    except (ConfinementError, OSError) as exc:
        raise PermanentFailure(f"{ctx.resource_name}: cannot create {path}: {exc}") from None


def _claim(fd: int, ctx: ResourceContext, path: Path, *, creating: bool, adopt: bool) -> bool:
    """Whether an existing directory may be managed, and whether it is (or becomes) adopted."""
    if is_ours(fd, ctx):
        return is_adopted(fd, ctx)
    if not creating and read_marker(fd, OWNER_ATTR) is None:
        return False  # ours by record; the marker was lost (or is unsupported)
    if adopt:
        return True
    raise refuse_takeover(ctx, path, "directory")


def _remove(
    location: Location, purge_content: bool, ctx: ResourceContext, current: AppliedState
) -> None:
    path = location.path
    try:
        with opened_parent(location) as parent:
            fd = open_subdirectory(parent, location.name)
            if fd is None:
                return
            try:
                adopted = is_adopted(fd, ctx) or (
                    current.data.get("adopted") and read_marker(fd, OWNER_ATTR) is None
                )
                # Only a template that writes ``deletion_policy: Delete`` destroys what it
                # adopted; the default hands it back.
                if adopted and ctx.deletion_policy != "Delete":
                    remove_markers(fd)  # adopted: handed back with its content
                    return
                if not may_delete(fd, ctx, current.physical_id is not None):
                    return
                if purge_content:
                    purge(fd)
                now = lstat_at(parent, location.name)
                if now is None or not os.path.samestat(os.fstat(fd), now):
                    return  # replaced while we looked: not what we checked
                try:
                    os.rmdir(location.name, dir_fd=parent)
                except FileNotFoundError:
                    return
                except OSError as exc:
                    if exc.errno != errno.ENOTEMPTY:
                        raise
                    left = sorted(os.listdir(fd))[:5]
                    raise PermanentFailure(
                        f"{ctx.resource_name}: {path} is not empty ({', '.join(left)}): remove "
                        "its content or set purge_on_delete: true"
                    ) from exc
            finally:
                os.close(fd)
    except FileNotFoundError:
        return
    except (ConfinementError, OSError) as exc:
        raise PermanentFailure(f"{ctx.resource_name}: cannot delete {path}: {exc}") from None


def _observe(location: Location) -> os.stat_result | None:
    try:
        with opened_parent(location) as parent:
            fd = open_subdirectory(parent, location.name)
    except (FileNotFoundError, ConfinementError):
        return None  # not reachable without following a symlink: not the directory we made
    if fd is None:
        return None
    try:
        return os.fstat(fd)
    finally:
        os.close(fd)
