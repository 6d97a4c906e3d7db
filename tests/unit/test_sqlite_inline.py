"""Inline SQLite transactions: done when the lock is free, refused (and undone) when not."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge.sqlite_inline import Busy, InlineSqlite
from support.sqlite_table import insert, rows, setup_table


@pytest.fixture
def inline(tmp_path: Path) -> Iterator[InlineSqlite]:
    db = InlineSqlite(tmp_path / "x.db", setup_table)
    yield db
    db.close()


def test_work_is_committed(inline: InlineSqlite) -> None:
    assert inline.run(insert, 1, "a") == 1
    assert rows(inline.path) == [(1, "a")]


def test_locked_file_is_busy_and_nothing_is_done(inline: InlineSqlite) -> None:
    inline.run(insert, 1, "a")
    other = sqlite3.connect(inline.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    try:
        with pytest.raises(Busy):
            inline.run(insert, 2, "b")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert rows(inline.path) == [(1, "a")]
    inline.run(insert, 2, "b")  # the lock is free again: done inline
    assert rows(inline.path) == [(1, "a"), (2, "b")]


def test_error_in_work_rolls_back(inline: InlineSqlite) -> None:
    def half_then_fail(conn: sqlite3.Connection) -> None:
        insert(conn, 5, "half")
        raise ValueError("boom")

    inline.run(insert, 1, "a")
    with pytest.raises(ValueError, match="boom"):
        inline.run(half_then_fail)
    with pytest.raises(sqlite3.IntegrityError):
        inline.run(insert, 1, "again")
    assert rows(inline.path) == [(1, "a")]


def test_closed_refuses_work(inline: InlineSqlite, tmp_path: Path) -> None:
    inline.run(insert, 1, "a")
    inline.close()
    with pytest.raises(sqlite3.ProgrammingError):
        inline.run(insert, 2, "b")
