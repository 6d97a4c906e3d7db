"""The embedded state file: checks made before SQLite opens it, and SQLite errors in words.

SQLite takes a 0-byte file for a new, empty database and reports a damaged page only when
some statement reads it, so a careless open can make a second copy of every process over
an emptied state, or crash half-way through an operation. The cheap checks happen here,
first: a missing file is a new state (made 0600, its directory 0700, since it holds hidden
parameters and passwords); an empty file, a file that is not SQLite's, or one shorter than
its header says, is refused with the path and the reason. The errors that mean the file
itself is unusable (damaged, full, unreadable) become ``StateError``: fatal, never retried.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import tempfile
from pathlib import Path

from converge.errors import NotFound, StateError

SQLITE_HEADER = b"SQLite format 3\x00"
_HEADER_SIZE = 100

# The primary result codes that mean the state file cannot be used any more: retrying
# cannot help, and going on would leave an operation half-done.
_SQLITE_IOERR = 10
_SQLITE_CORRUPT = 11
_SQLITE_CANTOPEN = 14
_SQLITE_FULL = 13
_SQLITE_READONLY = 8
_SQLITE_NOTADB = 26
_SQLITE_PERM = 3

_ADVICE = {
    _SQLITE_CORRUPT: "the state file is damaged; `converge state check` shows what is wrong, "
    "and a copy made by `converge state backup` can replace it",
    _SQLITE_NOTADB: "this is not a converge state file, or its first page is damaged",
    _SQLITE_FULL: "free space on the disk that holds the state file, then run the command "
    "again (the step that failed was not written)",
    _SQLITE_IOERR: "the disk holding the state file failed to read or write; check the disk "
    "and its free space",
    _SQLITE_READONLY: "the state file or its directory is read-only, and this command writes to it",
    _SQLITE_PERM: "permission denied",
}
FATAL_CODES = frozenset([*_ADVICE, _SQLITE_CANTOPEN])


def prepare(path: str | os.PathLike[str], *, create: bool) -> Path:
    """Check the state file before SQLite opens it; make it (and its directory) if missing.

    ``create=False`` (reading commands): a missing file is ``NotFound``, nothing is made.
    Returns the absolute path.
    """
    state = Path(path).absolute()
    try:
        size = state.stat().st_size
    except FileNotFoundError:
        if not create:
            missing = "" if state.parent.is_dir() else f" (no directory {state.parent})"
            raise NotFound(
                f"no state file at {state}{missing}: no stacks yet "
                "(--state or CONVERGE_STATE chooses the file)"
            ) from None
        _create(state)
        return state
    except OSError as exc:
        raise StateError(str(state), _os_reason(exc)) from exc
    if not state.is_file():
        raise StateError(str(state), "not a regular file")
    if size == 0:
        raise StateError(
            str(state), "empty file: not a converge state; remove it if you mean to start over"
        )
    _check_header(state, size)
    return state


def _create(state: Path) -> None:
    """A new state: the directory 0700 when converge makes it, the file 0600 from birth.

    The file is made as a SQLite database beside its place and linked there only when
    nothing is there yet, so another converge starting at the same moment never sees an
    empty file (which it would refuse) and neither overwrites the other's.
    """
    if not state.parent.exists():
        try:
            state.parent.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StateError(
                str(state), f"cannot make its directory {state.parent}: {_os_reason(exc)}"
            ) from exc
    try:
        handle, name = tempfile.mkstemp(prefix=f".{state.name}.", suffix=".new", dir=state.parent)
    except OSError as exc:
        raise StateError(str(state), f"cannot create it: {_os_reason(exc)}") from exc
    os.close(handle)
    try:
        conn = sqlite3.connect(name)
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # writes the header: no longer empty
        finally:
            conn.close()
        os.link(name, state)
    except FileExistsError:
        pass  # made a moment ago by another converge: open that one
    except (OSError, sqlite3.Error) as exc:
        raise StateError(str(state), f"cannot create it: {exc}") from exc
    finally:
        for leftover in (name, f"{name}-wal", f"{name}-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)


def _check_header(state: Path, size: int) -> None:
    try:
        with state.open("rb") as file:
            header = file.read(_HEADER_SIZE)
    except OSError as exc:
        raise StateError(str(state), _os_reason(exc)) from exc
    if len(header) < _HEADER_SIZE or not header.startswith(SQLITE_HEADER):
        raise StateError(
            str(state), "file is not a database (no SQLite header): not a converge state file"
        )
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The header's page count is valid only when its change counter matches (offset 92),
    # and the file may lag behind it while a write-ahead log holds newer pages.
    counted = header[24:28] == header[92:96] and pages > 0
    if counted and size < pages * page_size and not _has_wal(state):
        raise StateError(
            str(state),
            f"truncated: the file has {size} bytes but its header says "
            f"{pages} pages of {page_size} bytes; restore it from a backup",
        )


def _has_wal(state: Path) -> bool:
    try:
        return Path(f"{state}-wal").stat().st_size > 0
    except OSError:
        return False


def read_only_uri(state: Path) -> str:
    """A ``file:`` URI that opens the state for reading only.

    A state in WAL mode needs its ``-shm`` file to be read; on a read-only disk or
    directory SQLite cannot make it. With no ``-wal`` file beside it, everything is in
    the main file and nobody can be writing (a writer makes the ``-wal``), so the file
    is then opened as immutable.
    """
    base = f"file:{_uri_path(state)}?mode=ro"
    shm, wal = Path(f"{state}-shm"), Path(f"{state}-wal")
    if not shm.exists() and not wal.exists() and not os.access(state.parent, os.W_OK):
        return base + "&immutable=1"
    return base


def _uri_path(state: Path) -> str:
    return str(state).replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def error_code(exc: BaseException) -> int | None:
    """SQLite's primary result code of ``exc`` (a ``sqlite3.Error``), if it has one."""
    code = getattr(exc, "sqlite_errorcode", None)
    return None if code is None else int(code) & 0xFF


def state_error(location: str, exc: sqlite3.Error) -> StateError | None:
    """The fatal reading of a SQLite error (None: an ordinary, perhaps passing, one)."""
    code = error_code(exc)
    if code not in FATAL_CODES:
        return None
    if code == _SQLITE_CANTOPEN:
        return StateError(location, f"{exc}: {_cannot_open_reason(Path(location))}")
    return StateError(location, f"{exc}: {_ADVICE[code]}")


def _cannot_open_reason(state: Path) -> str:
    """SQLite says only "unable to open database file"; find out which part failed."""
    directory = state.parent
    if not directory.is_dir():
        return f"the directory {directory} does not exist"
    if not os.access(directory, os.X_OK):
        return f"the directory {directory} cannot be entered (permission denied)"
    if state.exists() and not os.access(state, os.R_OK):
        return "the file is not readable (permission denied)"
    if not os.access(directory, os.W_OK):
        return (
            f"the directory {directory} is read-only, and SQLite needs to make its "
            f"{state.name}-wal and {state.name}-shm files there"
        )
    return "the file or its directory cannot be opened"


def _os_reason(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return exc.strerror or str(exc)
