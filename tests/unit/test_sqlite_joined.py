"""Joined SQLite transactions: the calls of one turn of the event loop commit together,
each keeps its own outcome, and a locked file is waited for on the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from converge import sqlite_joined
from converge.sqlite_inline import InlineSqlite
from converge.sqlite_joined import JoinedTransactions


def _setup(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (k INTEGER PRIMARY KEY, v TEXT)")


def _insert(conn: sqlite3.Connection, key: int, value: str) -> int:
    conn.execute("INSERT INTO t VALUES (?, ?)", (key, value))
    return key


def _rows(path: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT k, v FROM t ORDER BY k").fetchall()


class _Counting(InlineSqlite):
    """Counts the transactions run."""

    transactions = 0

    def run(self, work, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.transactions += 1
        return super().run(work, *args, **kwargs)


@pytest.fixture
def inline(tmp_path: Path) -> Iterator[_Counting]:
    db = _Counting(tmp_path / "x.db", _setup)
    yield db
    db.close()


async def test_calls_of_one_turn_are_one_transaction(inline: _Counting) -> None:
    joined = JoinedTransactions(inline, asyncio.get_running_loop())
    results = await asyncio.gather(*(joined.run(_insert, k, f"v{k}") for k in range(50)))
    assert results == list(range(50))
    assert inline.transactions == 1
    assert _rows(inline.path) == [(k, f"v{k}") for k in range(50)]


async def test_a_failing_call_fails_alone(inline: _Counting) -> None:
    joined = JoinedTransactions(inline, asyncio.get_running_loop())
    await joined.run(_insert, 1, "first")
    outcomes = await asyncio.gather(
        joined.run(_insert, 2, "a"),
        joined.run(_insert, 1, "again"),  # the key exists: its own error
        joined.run(_insert, 3, "b"),
        return_exceptions=True,
    )
    assert outcomes[0] == 2 and outcomes[2] == 3
    assert isinstance(outcomes[1], sqlite3.IntegrityError)
    assert _rows(inline.path) == [(1, "first"), (2, "a"), (3, "b")]


async def test_a_cancelled_call_is_not_run(inline: _Counting) -> None:
    joined = JoinedTransactions(inline, asyncio.get_running_loop())
    kept = asyncio.ensure_future(joined.run(_insert, 1, "kept"))
    dropped = asyncio.ensure_future(joined.run(_insert, 2, "dropped"))
    await asyncio.sleep(0)  # both queued
    dropped.cancel()
    assert await kept == 1
    assert _rows(inline.path) == [(1, "kept")]


async def test_a_locked_file_is_waited_for_on_the_loop(inline: _Counting) -> None:
    loop = asyncio.get_running_loop()
    joined = JoinedTransactions(inline, loop)
    await joined.run(_insert, 1, "first")  # the file and its table exist
    other = sqlite3.connect(inline.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holding the write lock
    loop.call_later(0.2, other.execute, "COMMIT")
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(ticking())
    started = loop.time()
    results = await asyncio.gather(joined.run(_insert, 2, "a"), joined.run(_insert, 3, "b"))
    waited = loop.time() - started
    ticker.cancel()
    other.close()
    assert results == [2, 3]
    assert 0.15 <= waited < 1.0  # tried again shortly after the holder let go
    assert ticks >= 10  # the loop went on meanwhile
    assert _rows(inline.path) == [(1, "first"), (2, "a"), (3, "b")]


async def test_a_file_locked_too_long_fails_the_calls(
    inline: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_joined, "GIVE_UP_SECONDS", 0.1)
    joined = JoinedTransactions(inline, asyncio.get_running_loop())
    await joined.run(_insert, 1, "first")
    other = sqlite3.connect(inline.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match=r"stayed locked .* more than 0\.1 s"):
            await joined.run(_insert, 2, "a")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await joined.run(_insert, 3, "b") == 3  # and the next call is tried anew
