"""Local::Directory: a directory under the allowed roots, with its permission mode.

Create makes missing parents too and adopts a directory already there (an interrupted
create, or one the author wants managed). Delete removes it only when empty unless
``purge_on_delete`` says to remove its content; already gone is success.
"""

from __future__ import annotations

import asyncio
import os
import shutil
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
from converge.resources.local.paths import (
    ConfinementError,
    confine,
    may_delete,
    parse_mode,
    shown_mode,
    write_markers,
)
from converge.resources.local.watch import PathWatcher


class LocalDirectory(ResourcePlugin):
    type_name = "Local::Directory"
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
    }
    attributes_schema = {
        "path": AttributeSchema("The absolute path of the directory.", PropertyType.STRING),
    }

    def validate(
        self, properties: Mapping[str, Any], ctx: ValidationContext
    ) -> Iterable[tuple[str, str]]:
        return validate_path_and_mode(properties, ctx.allowed_roots)

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        path, mode = checked(ctx, properties)
        await asyncio.to_thread(_make, path, mode, ctx)
        return Outcome(str(path), {"path": str(path)})

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        path, mode = checked(ctx, properties)
        await asyncio.to_thread(_make, path, mode, ctx)
        return Outcome(str(path), {"path": str(path)})

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        path = located(ctx, current)
        if path is None:
            return
        purge = bool(current.properties.get("purge_on_delete"))
        await asyncio.to_thread(_remove, path, purge, ctx, current.physical_id is not None)

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        path = located(ctx, current)
        if path is None:
            return None
        try:
            info = await asyncio.to_thread(os.stat, path, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(info.st_mode):
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


def checked(ctx: ResourceContext, properties: Mapping[str, Any]) -> tuple[Path, int]:
    """The confined path and the mode, checked again at action time (values may be late)."""
    try:
        path = confine(properties["path"], ctx.allowed_roots)
        mode = parse_mode(properties.get("mode"))
    except (ConfinementError, ValueError) as exc:
        raise PermanentFailure(f"{ctx.resource_name}: {exc}") from None
    return path, mode


def located(ctx: ResourceContext, current: AppliedState) -> Path | None:
    """Where the thing is: the recorded path, else (interrupted create) the configured one."""
    raw = current.physical_id or current.properties.get("path")
    if not raw:
        return None
    try:
        return confine(str(raw), ctx.allowed_roots)
    except ConfinementError:
        return None


def _canonical_mode(value: Any) -> str | None:
    try:
        return f"{parse_mode(value):04o}"
    except ValueError:
        return None


def _make(path: Path, mode: int, ctx: ResourceContext) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise PermanentFailure(
            f"{ctx.resource_name}: {path} exists and is not a directory"
        ) from None
    except OSError as exc:
        raise PermanentFailure(f"{ctx.resource_name}: cannot create {path}: {exc}") from None
    if path.is_symlink() or not path.is_dir():
        raise PermanentFailure(f"{ctx.resource_name}: {path} exists and is not a directory")
    os.chmod(path, mode)
    write_markers(path, ctx)


def _remove(path: Path, purge: bool, ctx: ResourceContext, recorded: bool) -> None:
    if not path.is_dir() or path.is_symlink():
        return
    if not may_delete(path, ctx, recorded):
        return
    if purge:
        shutil.rmtree(path, ignore_errors=False)
        return
    try:
        path.rmdir()
    except FileNotFoundError:
        return
    except OSError as exc:
        left = sorted(entry.name for entry in path.iterdir())[:5]
        raise PermanentFailure(
            f"{ctx.resource_name}: {path} is not empty ({', '.join(left)}): remove its "
            "content or set purge_on_delete: true"
        ) from exc
