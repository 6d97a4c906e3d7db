"""A one-table SQLite file, as the inline and joined transaction tests start from."""

from __future__ import annotations

import sqlite3
from pathlib import Path


def setup_table(conn: sqlite3.Connection) -> None:
    """WAL, and the table ``t (k, v)``."""
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")


def insert(conn: sqlite3.Connection, key: int, value: str) -> int:
    conn.execute("INSERT INTO t VALUES (?, ?)", (key, value))
    return key


def rows(path: Path) -> list[tuple[int, str]]:
    """What the file holds, as another connection reads it."""
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT k, v FROM t ORDER BY k").fetchall()
