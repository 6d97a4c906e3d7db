"""The checks made before SQLite opens a state file (no engine, no database needed)."""

from __future__ import annotations

import sqlite3
import stat
from pathlib import Path

import pytest

from converge.adapters.sql import state_file
from converge.errors import NotFound, StateError


def sqlite_file(path: Path, rows: int = 200) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (a TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("x" * 100,)] * rows)
    conn.close()
    return path


def test_a_missing_file_is_new_for_writers_and_not_found_for_readers(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match=r"no state file at .*nowhere/s\.db \(no directory "):
        state_file.prepare(tmp_path / "nowhere" / "s.db", create=False)
    assert not (tmp_path / "nowhere").exists()

    made = state_file.prepare(tmp_path / "new" / "s.db", create=True)
    assert made.read_bytes().startswith(state_file.SQLITE_HEADER)  # never seen empty
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    assert stat.S_IMODE(made.parent.stat().st_mode) == 0o700
    assert [p.name for p in made.parent.iterdir()] == ["s.db"]  # no leftovers
    assert state_file.prepare(made, create=True) == made  # an existing state is kept


def test_an_existing_state_keeps_its_mode(tmp_path: Path) -> None:
    state = sqlite_file(tmp_path / "s.db")
    state.chmod(0o640)
    state_file.prepare(state, create=True)
    assert stat.S_IMODE(state.stat().st_mode) == 0o640


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty file: not a converge state; remove it if you mean to start over"),
        (b"hello", "file is not a database (no SQLite header)"),
        (b"x" * 4096, "file is not a database (no SQLite header)"),
    ],
)
def test_files_that_are_not_a_state_are_refused(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    state = tmp_path / "s.db"
    state.write_bytes(content)
    for create in (True, False):
        with pytest.raises(
            StateError, match=r"s\.db: " + reason.replace("(", r"\(").replace(")", r"\)")
        ):
            state_file.prepare(state, create=create)
    assert state.read_bytes() == content


def test_a_truncated_file_is_refused_unless_its_log_holds_the_rest(tmp_path: Path) -> None:
    state = sqlite_file(tmp_path / "s.db")
    whole = state.read_bytes()
    state.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(StateError, match="truncated: the file has"):
        state_file.prepare(state, create=True)
    Path(f"{state}-wal").write_bytes(b"frames")  # newer pages may still be in the WAL
    assert state_file.prepare(state, create=True) == state


def test_a_directory_is_not_a_state(tmp_path: Path) -> None:
    with pytest.raises(StateError, match="not a regular file"):
        state_file.prepare(tmp_path, create=True)
