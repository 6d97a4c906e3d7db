"""File operations that stay inside an allowed root while they act, not only when checked.

``confine`` resolves a path once; walking it again by name later would follow a parent that
someone swapped for a symlink in between. So every operation here starts from a descriptor
of the root and opens one component at a time relative to its parent's descriptor with
``O_NOFOLLOW | O_DIRECTORY``: a symlink at any level stops the walk with a
``ConfinementError`` instead of leading out. Creating, renaming, marking and removing then
use the last directory's descriptor (``dir_fd``), never a path string.

A directory renamed out of the root after it was opened is still reached through its
descriptor: that moves only what the mover could already write, and no path outside is ever
resolved by name.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from converge.resources.local.paths import ConfinementError, confine

_DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO someone put in place must not hang the worker.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_PURGE_DEPTH = 256


@dataclass(frozen=True)
class Location:
    """A path as an allowed root plus the names below it (none of them ``..``)."""

    root: Path
    parts: tuple[str, ...]

    @property
    def path(self) -> Path:
        return self.root.joinpath(*self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1]

    def shown(self, depth: int) -> Path:
        """The path of the first ``depth`` components (for messages)."""
        return self.root.joinpath(*self.parts[:depth])


def locate(raw: str, roots: Sequence[Path], *, allow_root: bool = False) -> Location:
    """Where a template's path lies now (symlinks resolved), or ``ConfinementError``."""
    real = confine(raw, roots, allow_root=allow_root)
    return _split(real, roots)


def locate_recorded(raw: str, roots: Sequence[Path]) -> Location:
    """Where a recorded physical path lies, taken literally: it was resolved when it was made,
    and resolving it again would follow whatever symlink was put in its way since."""
    path = Path(raw)  # ``..`` is refused, not collapsed: collapsing would skip a symlink
    if not path.is_absolute() or ".." in path.parts:
        raise ConfinementError(f"{raw!r} is not an absolute path inside the allowed roots")
    return _split(path, roots)


def _split(path: Path, roots: Sequence[Path]) -> Location:
    for root in (Path(os.path.realpath(root)) for root in roots):
        if path == root:
            return Location(root, ())
        if path.is_relative_to(root):
            return Location(root, path.relative_to(root).parts)
    shown = ", ".join(str(root) for root in roots)
    raise ConfinementError(f"{str(path)!r} is outside the allowed roots ({shown})")


def _symlink_error(location: Location, depth: int) -> ConfinementError:
    return ConfinementError(
        f"a symlink at {location.shown(depth)} would lead outside {location.root}; "
        "converge follows no symlink below an allowed root"
    )


def _open_child(parent: int, location: Location, depth: int, *, create: bool, mode: int) -> int:
    """The descriptor of component ``depth`` (1-based) under ``parent``, made if asked."""
    name = location.parts[depth - 1]
    if name in ("", ".", ".."):
        raise ConfinementError(f"{location.path}: the component {name!r} is not allowed")
    for _attempt in range(3):
        try:
            return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            # Made meanwhile by someone else: open what is there (or refuse it).
            with suppress(FileExistsError):
                os.mkdir(name, mode, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            if is_symlink(parent, name):
                raise _symlink_error(location, depth) from None
            raise ConfinementError(
                f"{location.shown(depth)} is in the way: it exists and is not a directory"
            ) from None
    raise ConfinementError(f"{location.shown(depth)} keeps changing; try again")


@contextmanager
def opened_parent(location: Location, *, create: bool = False, mode: int = 0o755) -> Iterator[int]:
    """A descriptor of the directory holding ``location``'s last name, reached from the root
    without following any symlink. ``create`` makes missing directories on the way (with
    ``mode``); otherwise a missing one raises ``FileNotFoundError``."""
    if not location.parts:
        raise ConfinementError(f"{location.root} is an allowed root itself; use a path inside it")
    current = os.open(location.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth in range(1, len(location.parts)):
            child = _open_child(current, location, depth, create=create, mode=mode)
            os.close(current)
            current = child
        yield current
    finally:
        os.close(current)


@contextmanager
def opened_directory(
    location: Location, *, create: bool = False, mode: int = 0o755
) -> Iterator[int]:
    """A descriptor of the directory at ``location`` itself (the root when it has no parts)."""
    fd = open_directory(location, create=create, mode=mode)
    try:
        yield fd
    finally:
        os.close(fd)


def open_directory(location: Location, *, create: bool = False, mode: int = 0o755) -> int:
    """``opened_directory`` for a descriptor that outlives the call (the caller closes it)."""
    if not location.parts:
        return os.open(location.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    with opened_parent(location, create=create, mode=mode) as parent:
        return _open_child(parent, location, len(location.parts), create=create, mode=mode)


def open_append(location: Location, mode: int = 0o644) -> int:
    """The file at ``location`` opened for appending, made (with missing parents) if absent;
    a symlink in its place is refused like one on the way. The caller closes it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
    with opened_parent(location, create=True) as parent:
        try:
            return os.open(location.name, flags, mode, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _symlink_error(location, len(location.parts)) from None
            raise


def is_symlink(parent: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
    except FileNotFoundError:
        return False


def lstat_at(parent: int, name: str) -> os.stat_result | None:
    """The entry ``name`` itself (a symlink is not followed); None when absent."""
    try:
        return os.lstat(name, dir_fd=parent)
    except FileNotFoundError:
        return None


def open_regular(parent: int, name: str) -> int | None:
    """A read descriptor of the regular file ``name``; None when absent or something else."""
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=parent)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None  # a symlink: not a file converge made
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def open_subdirectory(parent: int, name: str) -> int | None:
    """A descriptor of the directory ``name``; None when absent, a symlink or not a directory."""
    try:
        return os.open(name, _DIRECTORY_FLAGS, dir_fd=parent)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise


def create_exclusive(parent: int, name: str, mode: int) -> int:
    """A new file ``name`` opened for writing; a leftover of the same name is replaced."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, mode, dir_fd=parent)
    except FileExistsError:
        unlink_entry(parent, name)
        return os.open(name, flags, mode, dir_fd=parent)


def unlink_entry(parent: int, name: str) -> None:
    """Remove a non-directory entry (a symlink itself, never its target); absent is fine."""
    with suppress(FileNotFoundError):
        os.unlink(name, dir_fd=parent)


def purge(directory: int, *, depth: int = 0) -> None:
    """Remove everything inside the open ``directory``, following no symlink: a directory
    entry is opened with ``O_NOFOLLOW`` relative to its parent, so one swapped for a symlink
    is unlinked as a link and what it points to is left alone."""
    if depth > _PURGE_DEPTH:
        raise ConfinementError(f"directories nest deeper than {_PURGE_DEPTH} levels")
    with os.scandir(directory) as entries:
        names = [entry.name for entry in entries]
    for name in names:
        child = open_subdirectory(directory, name)
        if child is None:
            try:
                unlink_entry(directory, name)
            except IsADirectoryError:
                continue  # became a directory meanwhile: its rmdir below will report it
            continue
        try:
            purge(child, depth=depth + 1)
        finally:
            os.close(child)
        with suppress(FileNotFoundError):
            os.rmdir(name, dir_fd=directory)
