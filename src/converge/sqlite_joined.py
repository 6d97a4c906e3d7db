"""Calls made on one event loop in the same turn, run together in one SQLite transaction.

A burst of short writes from one process (a thousand test resources recording what they
made as their waits end together) cost a transaction each, and every one of them took the
file's write lock: with two processes writing the same file, one in six found it locked
and was handed to a thread whose SQLite busy handler sleeps 1, 2, 5, 10 ... ms between
looks, and lost the race to inline writers again (up to 0.2 s, measured). Here the calls
queued while the event loop was busy are one transaction at its next turn, and a locked
file is tried again on the loop after a short wait (the holder's transaction lasts about a
millisecond), never on a thread.

A joined transaction that fails for a reason of its own (a call's error) wrote nothing:
its calls then run one at a time, each with its own outcome.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

from converge.sqlite_inline import Busy, InlineSqlite

P = ParamSpec("P")
R = TypeVar("R")

# Waits between two tries at a locked file: short at first, doubling up to the most.
FIRST_RETRY_SECONDS = 0.0005
MOST_RETRY_SECONDS = 0.02
# How long a file may stay locked before the calls waiting for it fail (SQLite's busy
# timeout in the store's own connections is the same).
GIVE_UP_SECONDS = 30.0


@dataclass
class _Call:
    work: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]


class JoinedTransactions:
    """One event loop's calls on one SQLite file, joined per turn of the loop.

    Used from the loop's own thread only (``InlineSqlite`` keeps a connection per thread).
    """

    def __init__(self, inline: InlineSqlite, loop: asyncio.AbstractEventLoop) -> None:
        self._inline = inline
        self._loop = loop
        self._queued: list[_Call] = []
        self._scheduled = False
        self._locked_since: float | None = None
        self._retry_in = FIRST_RETRY_SECONDS

    async def run(
        self,
        work: Callable[Concatenate[sqlite3.Connection, P], R],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> R:
        """``work(connection, ...)`` in a write transaction with the other calls of this
        turn; its result, or its error."""
        future: asyncio.Future[R] = self._loop.create_future()
        self._queued.append(_Call(lambda conn: work(conn, *args, **kwargs), future))
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        calls = [call for call in self._queued if not call.future.done()]
        self._queued = []
        if not calls:
            return
        try:
            results = self._inline.run(_all, [call.work for call in calls])
        except Busy:
            self._wait_for_lock(calls)
            return
        except Exception:  # one call's error: nothing was written, each on its own
            self._one_by_one(calls)
            return
        self._unlocked()
        for call, result in zip(calls, results, strict=True):
            if not call.future.done():
                call.future.set_result(result)

    def _one_by_one(self, calls: list[_Call]) -> None:
        for index, call in enumerate(calls):
            try:
                result = self._inline.run(call.work)
            except Busy:
                self._wait_for_lock(calls[index:])
                return
            except Exception as exc:
                if not call.future.done():
                    call.future.set_exception(exc)
                continue
            self._unlocked()
            if not call.future.done():
                call.future.set_result(result)

    def _wait_for_lock(self, calls: list[_Call]) -> None:
        """Try ``calls`` again shortly (first, with whatever is queued by then); past
        ``GIVE_UP_SECONDS`` of a locked file, fail them."""
        now = time.monotonic()
        if self._locked_since is None:
            self._locked_since = now
        elif now - self._locked_since > GIVE_UP_SECONDS:
            self._unlocked()
            error = sqlite3.OperationalError(
                f"{self._inline.path} stayed locked by another connection for more than "
                f"{GIVE_UP_SECONDS:g} s"
            )
            for call in calls:
                if not call.future.done():
                    call.future.set_exception(error)
            return
        self._queued[:0] = calls
        if not self._scheduled:
            self._scheduled = True
            self._loop.call_later(self._retry_in, self._flush)
        self._retry_in = min(self._retry_in * 2, MOST_RETRY_SECONDS)

    def _unlocked(self) -> None:
        self._locked_since = None
        self._retry_in = FIRST_RETRY_SECONDS


def _all(conn: sqlite3.Connection, works: list[Callable[[sqlite3.Connection], Any]]) -> list[Any]:
    return [work(conn) for work in works]
