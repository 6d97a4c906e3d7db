"""Local::File: a text file under the allowed roots with its content and permission mode.

Content and mode change in place; a new path replaces the file. Writes are atomic (a
temporary file renamed over the path), so no reader and no interrupted create ever sees half
a file. Every step goes through directory descriptors opened from the root down
(``confined``), so a parent swapped for a symlink fails the action instead of leading out.
Create takes up a file carrying this resource's marker (an interrupted create); any other
existing file is refused, never overwritten, unless ``adopt: true``: then it is managed,
marked as adopted, and delete leaves it in place unless the template writes
``deletion_policy: Delete``. Missing parent directories are made.
"""

from __future__ import annotations

import hashlib
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
    create_exclusive,
    lstat_at,
    open_regular,
    opened_parent,
    unlink_entry,
)
from converge.resources.local.directory import checked, located, validate_path_and_mode
from converge.resources.local.paths import (
    ADOPT_DESCRIPTION,
    OWNER_ATTR,
    ConfinementError,
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


class LocalFile(ResourcePlugin):
    type_name = "Local::File"
    bound_to_host = True
    description = "A text file on this machine, inside the allowed roots."
    properties_schema = {
        "path": PropertySchema(
            PropertyType.STRING,
            "The file; a relative path is taken from the first allowed root.",
            required=True,
        ),
        "content": PropertySchema(
            PropertyType.STRING,
            "The text of the file (get_file, str_replace … work here).",
            default="",
            update_allowed=True,
        ),
        "mode": PropertySchema(
            PropertyType.ANY,
            "Permission bits as a quoted octal string.",
            default="0644",
            update_allowed=True,
        ),
        "adopt": PropertySchema(
            PropertyType.BOOLEAN,
            ADOPT_DESCRIPTION.format(kind="file"),
            default=False,
            update_allowed=True,
        ),
    }
    attributes_schema = {
        "path": AttributeSchema("The absolute path of the file.", PropertyType.STRING),
        "sha256": AttributeSchema("SHA-256 of the content (hex).", PropertyType.STRING),
        "size": AttributeSchema("Size of the content in bytes.", PropertyType.INTEGER),
    }

    def validate(
        self, properties: Mapping[str, Any], ctx: ValidationContext
    ) -> Iterable[tuple[str, str]]:
        return validate_path_and_mode(properties, ctx.allowed_roots)

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        return await self._write(ctx, properties, creating=True)

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        return await self._write(ctx, properties, creating=False)

    async def _write(
        self, ctx: ResourceContext, properties: Mapping[str, Any], *, creating: bool
    ) -> Outcome:
        location, mode = checked(ctx, properties)
        data = _encode(properties)
        adopt = bool(properties.get("adopt"))
        adopted = await in_thread(_write, location, data, mode, ctx, creating=creating, adopt=adopt)
        return Outcome(str(location.path), {**_facts(location.path, data), "adopted": adopted})

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        location = located(ctx, current)
        if location is not None:
            await in_thread(_remove, location, ctx, current)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        location = located(ctx, current)
        if location is None:
            return None
        return await in_thread(_observe, location, current.properties)

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        content = str(live.get("content") or "").encode()
        try:
            mode: str | None = f"{parse_mode(live.get('mode')):04o}"
        except ValueError:
            mode = None
        return {"content_sha256": hashlib.sha256(content).hexdigest(), "mode": mode}

    def drift_diff(self, applied: Mapping[str, Any], live: Mapping[str, Any]) -> Mapping[str, str]:
        wanted, found = _text(applied), _text(live)
        if wanted == found:
            return {}
        # difflib only when a diff is asked for: ``validate`` loads every plugin module.
        from converge.core.textdiff import short_unified_diff

        return {"content_sha256": short_unified_diff(wanted, found)}

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        values = {
            "path": current.physical_id,
            "sha256": current.data.get("sha256"),
            "size": current.data.get("size"),
        }
        return {name: values[name] for name in names if name in values}

    def watch(self, ctx: Any, managed: Mapping[str, AppliedState]) -> Any:
        from converge.resources.local.watch import PathWatcher  # inotify: only when watching

        return PathWatcher(managed).changes()


def _text(properties: Mapping[str, Any]) -> str:
    content = properties.get("content")
    return "" if content is None else str(content)


def _encode(properties: Mapping[str, Any]) -> bytes:
    return _text(properties).encode("utf-8")


def _facts(path: Path, data: bytes) -> dict[str, Any]:
    return {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _write(
    location: Location, data: bytes, mode: int, ctx: ResourceContext, *, creating: bool, adopt: bool
) -> bool:
    """Write atomically through descriptors; whether the file is an adopted one."""
    path = location.path
    try:
        with opened_parent(location, create=True) as parent:
            adopted = _claim(parent, location, ctx, creating=creating, adopt=adopt)
            # A name of this row: a leftover of an interrupted write is simply replaced.
            temporary = _temporary_name(location, ctx)
            fd = create_exclusive(parent, temporary, mode)
            try:
                with os.fdopen(fd, "wb", closefd=False) as handle:
                    handle.write(data)
                    handle.flush()
                os.fsync(fd)
                os.fchmod(fd, mode)  # the umask may have narrowed it
                write_markers(fd, ctx, adopted=adopted)
            finally:
                os.close(fd)
            os.replace(temporary, location.name, src_dir_fd=parent, dst_dir_fd=parent)
            return adopted
    except (ConfinementError, OSError) as exc:
        raise PermanentFailure(f"{ctx.resource_name}: cannot write {path}: {exc}") from None


def _claim(
    parent: int, location: Location, ctx: ResourceContext, *, creating: bool, adopt: bool
) -> bool:
    """Check what is at the path now: whether writing may replace it, and whether it is (or
    becomes) adopted. Nothing there: ours."""
    existing = lstat_at(parent, location.name)
    if existing is None:
        return False
    if not stat.S_ISREG(existing.st_mode):
        raise PermanentFailure(
            f"{ctx.resource_name}: {location.path} exists and is not a regular file"
        )
    fd = open_regular(parent, location.name)
    if fd is None:
        return False  # gone meanwhile
    try:
        if is_ours(fd, ctx):
            return is_adopted(fd, ctx)
        if not creating and read_marker(fd, OWNER_ATTR) is None:
            return False  # ours by record; the marker was lost (or is unsupported)
        if adopt:
            return True
        raise refuse_takeover(ctx, location.path, "file")
    finally:
        os.close(fd)


def _temporary_name(location: Location, ctx: ResourceContext) -> str:
    return f".{location.name}.{ctx.physical_name}.tmp"


def _remove(location: Location, ctx: ResourceContext, current: AppliedState) -> None:
    try:
        with opened_parent(location) as parent:
            # A write of this row killed before its rename left this behind; nobody else
            # writes under this name, so it goes whether or not the file was ever made.
            unlink_entry(parent, _temporary_name(location, ctx))
            fd = open_regular(parent, location.name)
            if fd is None:
                return
            try:
                adopted = is_adopted(fd, ctx) or (
                    current.data.get("adopted") and read_marker(fd, OWNER_ATTR) is None
                )
                # Only a template that writes ``deletion_policy: Delete`` destroys what it
                # adopted; the default hands it back.
                if adopted and ctx.deletion_policy != "Delete":
                    remove_markers(fd)  # adopted: handed back
                    return
                if not may_delete(fd, ctx, current.physical_id is not None):
                    return
                now = lstat_at(parent, location.name)
                if now is None or not os.path.samestat(os.fstat(fd), now):
                    return  # replaced while we looked: not what we checked
            finally:
                os.close(fd)
            unlink_entry(parent, location.name)
    except FileNotFoundError:
        return
    except (ConfinementError, OSError) as exc:
        raise PermanentFailure(
            f"{ctx.resource_name}: cannot delete {location.path}: {exc}"
        ) from None


def _observe(location: Location, applied: Mapping[str, Any]) -> Mapping[str, Any] | None:
    try:
        with opened_parent(location) as parent:
            fd = open_regular(parent, location.name)
    except (FileNotFoundError, ConfinementError):
        return None  # not reachable without following a symlink: not the file we made
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        content = handle.read().decode("utf-8", "replace")
    return {
        **applied,
        "content": content,
        "mode": shown_mode(stat.S_IMODE(info.st_mode), applied.get("mode")),
    }
