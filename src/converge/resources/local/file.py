"""Local::File: a text file under the allowed roots with its content and permission mode.

Content and mode change in place; a new path replaces the file. Writes are atomic (a
temporary file renamed over the path), so no reader and no interrupted create ever sees half
a file. Create adopts a file already there when its content is what the template wants or it
carries this resource's marker; any other existing file is refused, never overwritten.
Missing parent directories are made.
"""

from __future__ import annotations

import asyncio
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
from converge.resources.local.directory import checked, located, validate_path_and_mode
from converge.resources.local.paths import (
    is_ours,
    may_delete,
    parse_mode,
    shown_mode,
    write_markers,
)
from converge.resources.local.watch import PathWatcher


class LocalFile(ResourcePlugin):
    type_name = "Local::File"
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
        path, mode = checked(ctx, properties)
        data = _encode(properties)
        await asyncio.to_thread(_write, path, data, mode, ctx, adopting=True)
        return Outcome(str(path), _facts(path, data))

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        path, mode = checked(ctx, properties)
        data = _encode(properties)
        await asyncio.to_thread(_write, path, data, mode, ctx, adopting=False)
        return Outcome(str(path), _facts(path, data))

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        path = located(ctx, current)
        if path is not None:
            await asyncio.to_thread(_remove, path, ctx, current.physical_id is not None)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        path = located(ctx, current)
        if path is None:
            return None
        return await asyncio.to_thread(_observe, path, current.properties)

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        content = str(live.get("content") or "").encode()
        try:
            mode: str | None = f"{parse_mode(live.get('mode')):04o}"
        except ValueError:
            mode = None
        return {"content_sha256": hashlib.sha256(content).hexdigest(), "mode": mode}

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
        return PathWatcher(managed).changes()


def _encode(properties: Mapping[str, Any]) -> bytes:
    content = properties.get("content")
    return ("" if content is None else str(content)).encode("utf-8")


def _facts(path: Path, data: bytes) -> dict[str, Any]:
    return {"path": str(path), "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _write(path: Path, data: bytes, mode: int, ctx: ResourceContext, *, adopting: bool) -> None:
    if path.is_symlink() or path.is_dir():
        raise PermanentFailure(f"{ctx.resource_name}: {path} exists and is not a regular file")
    if adopting and path.exists() and not is_ours(path, ctx) and path.read_bytes() != data:
        raise PermanentFailure(
            f"{ctx.resource_name}: {path} already exists with other content and was not made "
            "by this resource; remove it or choose another path"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A name of this row: a leftover of an interrupted write is simply overwritten.
        temporary = path.with_name(f".{path.name}.{ctx.physical_name}.tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)  # the umask may have narrowed it
        write_markers(temporary, ctx)
        os.replace(temporary, path)
    except OSError as exc:
        raise PermanentFailure(f"{ctx.resource_name}: cannot write {path}: {exc}") from None


def _remove(path: Path, ctx: ResourceContext, recorded: bool) -> None:
    if not path.is_file() or path.is_symlink():
        return
    if may_delete(path, ctx, recorded):
        path.unlink(missing_ok=True)


def _observe(path: Path, applied: Mapping[str, Any]) -> Mapping[str, Any] | None:
    try:
        info = os.stat(path, follow_symlinks=False)
        if not stat.S_ISREG(info.st_mode):
            return None
        content = path.read_bytes().decode("utf-8", "replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    return {
        **applied,
        "content": content,
        "mode": shown_mode(stat.S_IMODE(info.st_mode), applied.get("mode")),
    }
