"""Looking after the embedded state file: an integrity check and an online backup.

Both read the file through SQLite alone (no engine, no migration), so they work while
another converge (``serve``) writes to it, and on a read-only copy.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from converge.adapters.sql import state_file
from converge.adapters.sql.migrations import SCHEMA_HEAD, SCHEMA_REVISIONS
from converge.errors import Conflict, StateError

# integrity_check stops after this many problems: enough to see what is wrong.
_MAX_PROBLEMS = 20


@dataclass(frozen=True)
class CheckReport:
    """What ``check`` found: ``problems`` is empty when the state is sound."""

    path: str
    schema: str | None
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, object]:
        return {
            "state": self.path,
            "ok": self.ok,
            "schema": self.schema,
            "expected_schema": SCHEMA_HEAD,
            "problems": list(self.problems),
        }


def check(path: str | os.PathLike[str]) -> CheckReport:
    """SQLite's integrity check, foreign keys and the schema version; never writes.

    A missing file is ``NotFound``; everything else wrong is a problem in the report.
    """
    try:
        state = state_file.prepare(path, create=False)
    except StateError as exc:
        return CheckReport(exc.location, None, [exc.reason])
    problems: list[str] = []
    schema: str | None = None
    try:
        with _reading(state) as conn:
            rows = conn.execute(f"PRAGMA integrity_check({_MAX_PROBLEMS})").fetchall()
            problems += [str(row[0]) for row in rows if row[0] != "ok"]
            if not problems:
                problems += [
                    f"table {table} row {rowid}: no row {parent} it refers to"
                    for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
                ]
            schema = _schema(conn, problems)
    except sqlite3.DatabaseError as exc:  # too damaged for integrity_check to go on
        problems.append(str(exc))
    return CheckReport(str(state), schema, problems)


def _schema(conn: sqlite3.Connection, problems: list[str]) -> str | None:
    try:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:
        problems.append("no converge schema version (table alembic_version): not a converge state")
        return None
    schema = None if row is None else str(row[0])
    if schema not in SCHEMA_REVISIONS:
        problems.append(
            f"unknown schema version {schema} (this converge knows up to {SCHEMA_HEAD})"
        )
    return schema


async def upgrade(path: str | os.PathLike[str]) -> tuple[str | None, str]:
    """Bring the state's schema up to date (what any writing command does on open).

    Returns the schema version before and after.
    """
    from converge.adapters.sql.store import SqlStore

    state = state_file.prepare(path, create=False)
    with _reading(state) as conn:
        before = _schema(conn, [])
    await SqlStore.open_file(state).close()
    return before, SCHEMA_HEAD


def backup(
    path: str | os.PathLike[str], target: str | os.PathLike[str], *, force: bool = False
) -> Path:
    """Copy the state to ``target`` with SQLite's online backup: a consistent snapshot
    even while another process writes. The copy is made 0600 beside the target and
    renamed over it, so a failed backup leaves no half-written file. Returns the target.
    """
    state = state_file.prepare(path, create=False)
    destination = Path(target).absolute()
    if destination.exists() and not force:
        raise Conflict(f"{destination} already exists: choose another path, or --force")
    if destination.exists() and destination.samefile(state):
        raise Conflict(f"{destination} is the state file itself: choose another path")
    if not destination.parent.is_dir():
        raise StateError(str(destination), f"the directory {destination.parent} does not exist")
    handle, temporary = tempfile.mkstemp(  # mode 0600
        prefix=f".{destination.name}.", suffix=".partial", dir=destination.parent
    )
    os.close(handle)
    try:
        with _reading(state) as source, contextlib.closing(sqlite3.connect(temporary)) as copy:
            source.backup(copy)
            copy.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            # A copy of a damaged state must not replace a good backup (--force).
            verdict = str(copy.execute("PRAGMA quick_check(1)").fetchone()[0])
        if verdict != "ok":
            found = " ".join(verdict.split())
            raise StateError(
                str(state), f"damaged ({found}): no backup was written; see `converge state check`"
            )
        os.replace(temporary, destination)
    except sqlite3.DatabaseError as exc:
        fatal = state_file.state_error(str(state), exc)
        raise fatal or StateError(str(state), str(exc)) from exc
    except OSError as exc:
        raise StateError(str(destination), exc.strerror or str(exc)) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return destination


@contextlib.contextmanager
def _reading(state: Path) -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(state_file.read_only_uri(state), uri=True, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()
