"""A real check-then-use race against Local::File and Local::Directory.

A thread keeps exchanging a directory inside the allowed root with a symlink to a directory
outside it (``renameat2(RENAME_EXCHANGE)``: the name always exists, as either one), while
the plugins create, update or delete files and a ``purge_on_delete`` directory below that
name. The outside directory holds files of the same names; anything in it that is created,
changed or deleted is an escape. Used by the integration test and by
``bench/bench_symlink_race.py``.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from converge.engine.clock import SystemClock
from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext
from converge.resources.local import LocalDirectory, LocalFile

PHASES = ("create", "update", "destroy")
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_libc = ctypes.CDLL(None, use_errno=True)


def exchange(first: Path, second: Path) -> None:
    """Swap two names atomically."""
    if _libc.renameat2(_AT_FDCWD, bytes(first), _AT_FDCWD, bytes(second), _RENAME_EXCHANGE):
        number = ctypes.get_errno()
        raise OSError(number, os.strerror(number), str(first))


@dataclass
class RaceResult:
    phase: str
    rounds: int = 0
    actions: int = 0
    refused: int = 0  # actions that failed with PermanentFailure (a swap was seen)
    swaps: int = 0
    escapes: list[str] = field(default_factory=list)  # what changed outside, per round
    bugs: list[str] = field(default_factory=list)  # anything else raised by a plugin

    @property
    def rounds_with_escapes(self) -> int:
        return len({escape.split(":", 1)[0] for escape in self.escapes})


class _Swapper(threading.Thread):
    def __init__(self, inside: Path, link: Path) -> None:
        super().__init__(name="symlink-swapper", daemon=True)
        self.inside, self.link = inside, link
        self.stop = threading.Event()
        self.swaps = 0

        self.failure: OSError | None = None

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                exchange(self.inside, self.link)
                self.swaps += 1
        except OSError as exc:  # reported by finish(): a race that stopped proves nothing
            self.failure = exc

    def finish(self) -> None:
        self.stop.set()
        self.join()
        if self.failure is not None:
            raise RuntimeError(f"the swapping thread failed: {self.failure}")
        if self.inside.is_symlink():  # leave the real directory in place
            exchange(self.inside, self.link)


def _snapshot(tree: Path) -> dict[str, tuple[str, bytes, int, tuple[str, ...]]]:
    """Kind, content, mode and attribute names of everything under ``tree``."""
    found: dict[str, tuple[str, bytes, int, tuple[str, ...]]] = {}
    for directory, dirs, files in os.walk(tree):
        for name in dirs + files:
            path = Path(directory, name)
            info = path.lstat()
            kind = "dir" if path.is_dir() else "file"
            content = path.read_bytes() if kind == "file" else b""
            attributes = tuple(sorted(os.listxattr(path, follow_symlinks=False)))
            found[str(path.relative_to(tree))] = (kind, content, info.st_mode, attributes)
    return found


def _context(root: Path, name: str) -> ResourceContext:
    return ResourceContext(
        stack_id="race",
        stack_name="race",
        resource_name=name,
        physical_name=f"race-{name}-00000000",
        clock=SystemClock(),
        deadline=None,
        logger=logging.getLogger("race"),
        allowed_roots=(root,),
    )


async def _round(base: Path, phase: str, files: int, result: RaceResult, number: int) -> None:
    root, outside = base / "root", base / "outside"
    inside, link = root / "shared", root / "shared.link"
    inside.mkdir(parents=True)
    (outside / "d").mkdir(parents=True)
    for index in range(files):
        (outside / f"f{index}").write_text("outside: must stay\n")
        (outside / "d" / f"c{index}").write_text("outside: must stay\n")
    os.symlink(outside, link)
    file_plugin, directory_plugin = LocalFile(), LocalDirectory()
    directory_props = {"path": "shared/d", "mode": "0755", "purge_on_delete": True}

    def file_props(index: int, content: str) -> dict[str, object]:
        return {"path": f"shared/f{index}", "content": content, "mode": "0644"}

    applied: dict[str, AppliedState] = {}

    def create_all() -> list[Callable[[], Awaitable[object]]]:
        actions: list[Callable[[], Awaitable[object]]] = []
        for index in range(files):
            ctx, props = _context(root, f"f{index}"), file_props(index, "v1\n")

            async def make(ctx: ResourceContext = ctx, props: dict[str, object] = props) -> None:
                outcome = await file_plugin.create(ctx, props)
                applied[ctx.resource_name] = AppliedState(outcome.physical_id, props, outcome.data)

            actions.append(make)
        ctx = _context(root, "d")

        async def make_directory() -> None:
            outcome = await directory_plugin.create(ctx, directory_props)
            applied["d"] = AppliedState(outcome.physical_id, directory_props, outcome.data)

        actions.append(make_directory)
        return actions

    def update_all() -> list[Callable[[], Awaitable[object]]]:
        return [
            lambda index=index: file_plugin.update(
                _context(root, f"f{index}"),
                applied[f"f{index}"],
                file_props(index, "v2\n"),
            )
            for index in range(files)
        ]

    def destroy_all() -> list[Callable[[], Awaitable[object]]]:
        actions: list[Callable[[], Awaitable[object]]] = [
            lambda index=index: file_plugin.delete(
                _context(root, f"f{index}"), applied[f"f{index}"]
            )
            for index in range(files)
        ]
        actions.append(lambda: directory_plugin.delete(_context(root, "d"), applied["d"]))
        return actions

    if phase != "create":
        for action in create_all():
            await action()
        for index in range(files):  # content for the purge to remove
            (inside / "d" / f"c{index}").write_text("inside\n")
    if phase == "create":
        chosen = create_all()
    elif phase == "update":
        chosen = update_all()
    else:
        chosen = destroy_all()
    before = _snapshot(outside)
    swapper = _Swapper(inside, link)
    swapper.start()
    try:
        for action in chosen:
            result.actions += 1
            try:
                await action()
            except PermanentFailure:
                result.refused += 1
            except Exception as exc:  # a plugin bug is a finding, not a crash
                result.bugs.append(f"round {number}: {type(exc).__name__}: {exc}")
    finally:
        swapper.finish()
    result.swaps += swapper.swaps
    after = _snapshot(outside)
    for name in sorted(before.keys() | after.keys()):
        if before.get(name) != after.get(name):
            change = (
                "created" if name not in before else "deleted" if name not in after else "changed"
            )
            result.escapes.append(f"round {number}: {name} {change}")


def race(phase: str, rounds: int, files: int = 16) -> RaceResult:
    """Run ``rounds`` rounds of ``phase`` (create, update or destroy) under a swapping thread."""
    result = RaceResult(phase)
    for number in range(rounds):
        with tempfile.TemporaryDirectory(prefix="converge-race-") as base:
            asyncio.run(_round(Path(base), phase, files, result, number))
        result.rounds += 1
    return result
