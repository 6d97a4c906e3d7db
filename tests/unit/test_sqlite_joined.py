"""Joined SQLite transactions: the calls of one turn of the event loop commit together,
each keeps its own outcome (its error and its rollback undo its own writes only), and a
locked file is waited for on the loop."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from converge import sqlite_joined
from converge.sqlite_inline import InlineSqlite
from converge.sqlite_joined import CallConnection, JoinedTransactions
from support.sqlite_table import insert, rows, setup_table


def _insert_then_undo(conn: sqlite3.Connection, key: int) -> str:
    """As a compare-and-swap that wrote, then found it lost: undoes its own writes."""
    conn.execute("INSERT INTO t VALUES (?, 'undone')", (key,))
    conn.rollback()
    return "undone"


class _Counting(InlineSqlite):
    """Counts the transactions run."""

    transactions = 0

    def run(self, work: Any, *args: Any, **kwargs: Any) -> Any:
        self.transactions += 1
        return super().run(work, *args, **kwargs)


@pytest.fixture
def inline(tmp_path: Path) -> Iterator[_Counting]:
    db = _Counting(tmp_path / "x.db", setup_table, factory=CallConnection)
    yield db
    db.close()


def _joined(inline: InlineSqlite) -> JoinedTransactions:
    return JoinedTransactions(inline, asyncio.get_running_loop())


async def test_the_first_call_runs_at_once_and_the_rest_of_the_turn_together(
    inline: _Counting,
) -> None:
    joined = _joined(inline)
    results = await asyncio.gather(*(joined.run(insert, k, f"v{k}") for k in range(50)))
    assert results == list(range(50))
    assert inline.transactions == 2  # the first alone, the 49 others as one
    assert rows(inline.path) == [(k, f"v{k}") for k in range(50)]
    assert await joined.run(insert, 50, "alone") == 50  # a call on its own: at once
    assert inline.transactions == 3


async def test_a_failing_call_undoes_its_own_writes_only(inline: _Counting) -> None:
    joined = _joined(inline)
    await joined.run(insert, 1, "first")
    outcomes = await asyncio.gather(
        joined.run(insert, 10, "blocker"),  # runs at once: the others are joined
        joined.run(insert, 2, "a"),
        joined.run(insert, 1, "again"),  # the key exists: its own error
        joined.run(insert, 3, "b"),
        return_exceptions=True,
    )
    assert outcomes[0] == 10 and outcomes[1] == 2 and outcomes[3] == 3
    assert isinstance(outcomes[2], sqlite3.IntegrityError)
    assert inline.transactions == 3  # the others were not run again
    assert rows(inline.path) == [(1, "first"), (2, "a"), (3, "b"), (10, "blocker")]


async def test_a_calls_rollback_undoes_its_own_writes_only(inline: _Counting) -> None:
    joined = _joined(inline)
    outcomes = await asyncio.gather(
        joined.run(insert, 1, "at once"),
        joined.run(insert, 2, "kept"),
        joined.run(_insert_then_undo, 3),
        joined.run(insert, 4, "kept too"),
    )
    assert outcomes == [1, 2, "undone", 4]
    assert rows(inline.path) == [(1, "at once"), (2, "kept"), (4, "kept too")]
    assert await joined.run(_insert_then_undo, 5) == "undone"  # alone: a plain rollback
    assert rows(inline.path)[-1] == (4, "kept too")


async def test_more_calls_than_one_transaction_takes_go_in_several(
    inline: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_joined, "MOST_JOINED", 10)
    joined = _joined(inline)
    results = await asyncio.gather(*(joined.run(insert, k, "v") for k in range(31)))
    assert results == list(range(31))
    assert inline.transactions == 4  # 1 at once, then 10, 10 and 10
    assert len(rows(inline.path)) == 31


async def test_a_cancelled_call_is_not_run(inline: _Counting) -> None:
    joined = _joined(inline)
    first = asyncio.ensure_future(joined.run(insert, 1, "first"))
    kept = asyncio.ensure_future(joined.run(insert, 2, "kept"))
    dropped = asyncio.ensure_future(joined.run(insert, 3, "dropped"))
    await asyncio.sleep(0)  # the first ran at once, the others are queued
    dropped.cancel()
    assert await first == 1 and await kept == 2
    assert rows(inline.path) == [(1, "first"), (2, "kept")]


async def test_a_locked_file_is_waited_for_on_the_loop(inline: _Counting) -> None:
    loop = asyncio.get_running_loop()
    joined = _joined(inline)
    await joined.run(insert, 1, "first")  # the file and its table exist
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
    results = await asyncio.gather(joined.run(insert, 2, "a"), joined.run(insert, 3, "b"))
    waited = loop.time() - started
    ticker.cancel()
    other.close()
    assert results == [2, 3]
    assert 0.15 <= waited < 1.0  # tried again shortly after the holder let go
    assert ticks >= 10  # the loop went on meanwhile
    assert rows(inline.path) == [(1, "first"), (2, "a"), (3, "b")]


async def test_a_locked_file_is_tried_again_with_waits_however_many_calls_wait(
    inline: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """More calls than one transaction takes, and the file locked: they wait together,
    with the waits doubling, not one try per turn of the loop."""
    monkeypatch.setattr(sqlite_joined, "MOST_JOINED", 2)
    loop = asyncio.get_running_loop()
    joined = _joined(inline)
    await joined.run(insert, 1, "first")
    other = sqlite3.connect(inline.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    loop.call_later(0.2, other.execute, "COMMIT")
    before = inline.transactions
    results = await asyncio.gather(*(joined.run(insert, k, "v") for k in range(2, 9)))
    other.close()
    assert results == list(range(2, 9))
    # 0.5, 1, 2, 4 ... 20 ms apart: about a dozen tries in 0.2 s, then 4 transactions
    assert inline.transactions - before < 40
    assert len(rows(inline.path)) == 8


async def test_a_file_locked_too_long_fails_the_calls(
    inline: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_joined, "GIVE_UP_SECONDS", 0.1)
    joined = _joined(inline)
    await joined.run(insert, 1, "first")
    other = sqlite3.connect(inline.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(sqlite3.OperationalError, match=r"stayed locked .* more than 0\.1 s"):
            await joined.run(insert, 2, "a")
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert await joined.run(insert, 3, "b") == 3  # and the next call is tried anew


async def test_calls_waiting_behind_those_that_gave_up_try_anew(
    inline: _Counting, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file stays locked past the limit for the first transaction's calls; those
    queued behind them are not left waiting forever: they try anew, and get in once the
    lock is let go."""
    monkeypatch.setattr(sqlite_joined, "GIVE_UP_SECONDS", 0.1)
    monkeypatch.setattr(sqlite_joined, "MOST_JOINED", 1)
    loop = asyncio.get_running_loop()
    joined = _joined(inline)
    await joined.run(insert, 1, "first")
    other = sqlite3.connect(inline.path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    loop.call_later(0.15, other.execute, "COMMIT")
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(joined.run(insert, k, "v") for k in (2, 3, 4)), return_exceptions=True),
        5,
    )
    other.close()
    assert isinstance(outcomes[0], sqlite3.OperationalError)  # it gave up
    assert outcomes[1:] == [3, 4]
    assert rows(inline.path) == [(1, "first"), (3, "v"), (4, "v")]
