"""Pushed changes of local reality: inotify for paths, pidfd for processes.

Each watcher turns kernel notifications into physical ids whose reality may have changed
(hints: the caller observes them). Paths are watched through their parent directory, so an
edit, a mode change, a deletion or a rename of the entry itself is seen; a missing parent is
watched through its nearest existing ancestor and the watches are re-armed as directories
come and go.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

from asyncinotify import Inotify, Mask

from converge.resources.base import AppliedState
from converge.resources.local import procfs

_DIRECTORY_EVENTS = (
    Mask.CREATE
    | Mask.DELETE
    | Mask.MOVED_FROM
    | Mask.MOVED_TO
    | Mask.CLOSE_WRITE
    | Mask.MODIFY
    | Mask.ATTRIB
    | Mask.DELETE_SELF
    | Mask.MOVE_SELF
    | Mask.ONLYDIR
)
_STRUCTURE = Mask.CREATE | Mask.DELETE | Mask.MOVED_FROM | Mask.MOVED_TO | Mask.IGNORED
# How often processes are checked where the kernel has no pidfd.
POLL_INTERVAL = 0.25


class PathWatcher:
    """Yields the managed paths (physical ids) that inotify says may have changed."""

    def __init__(self, managed: Mapping[str, AppliedState]) -> None:
        self._paths = {Path(physical_id): physical_id for physical_id in managed}

    async def changes(self) -> AsyncIterator[str]:
        if not self._paths:
            return
        with Inotify() as inotify:
            armed: set[Path] = set()
            self._arm(inotify, armed)
            async for event in inotify:
                if event.path is not None:
                    for physical_id in self._affected(event.path):
                        yield physical_id
                if event.mask & _STRUCTURE:
                    armed = {w.path for w in inotify.watches if w.path is not None}
                    self._arm(inotify, armed)

    def _arm(self, inotify: Inotify, armed: set[Path]) -> None:
        for path in self._paths:
            directory = _nearest_existing(path.parent)
            if directory is None or directory in armed:
                continue
            try:
                inotify.add_watch(directory, _DIRECTORY_EVENTS)
            except OSError:
                continue  # vanished between the check and the watch: re-armed on its event
            armed.add(directory)

    def _affected(self, changed: Path) -> list[str]:
        return [
            physical_id
            for path, physical_id in self._paths.items()
            if path == changed or changed in path.parents
        ]


def _nearest_existing(directory: Path) -> Path | None:
    for candidate in (directory, *directory.parents):
        if candidate.is_dir():
            return candidate
    return None


class ProcessWatcher:
    """Yields the managed processes (physical ids) that have exited, pushed by pidfd."""

    def __init__(self, managed: Mapping[str, AppliedState]) -> None:
        self._managed = dict(managed)

    async def changes(self) -> AsyncIterator[str]:
        if not self._managed:
            return
        if not hasattr(os, "pidfd_open"):
            async for physical_id in self._poll():
                yield physical_id
            return
        loop = asyncio.get_running_loop()
        exited: asyncio.Queue[str] = asyncio.Queue()
        descriptors: list[int] = []
        try:
            for physical_id, state in self._managed.items():
                identity = procfs.identity_of(state.data)
                fd = _pidfd(identity.pid) if identity is not None else None
                # Opened first, checked after: the descriptor is the process that was checked.
                if fd is None or identity is None or not procfs.is_running(identity):
                    if fd is not None:
                        os.close(fd)
                    exited.put_nowait(physical_id)
                    continue
                descriptors.append(fd)
                loop.add_reader(fd, _on_exit, loop, fd, exited, physical_id)
            while True:
                yield await exited.get()
        finally:
            for fd in descriptors:
                loop.remove_reader(fd)
                os.close(fd)

    async def _poll(self) -> AsyncIterator[str]:
        alive = dict(self._managed)
        while alive:
            for physical_id, state in list(alive.items()):
                identity = procfs.identity_of(state.data)
                if identity is None or not procfs.is_running(identity):
                    del alive[physical_id]
                    yield physical_id
            await asyncio.sleep(POLL_INTERVAL)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _on_exit(
    loop: asyncio.AbstractEventLoop, fd: int, exited: asyncio.Queue[str], physical_id: str
) -> None:
    loop.remove_reader(fd)
    exited.put_nowait(physical_id)
