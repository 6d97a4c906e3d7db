"""Calls made on one event loop in the same turn, run together in one SQLite transaction.

A transaction's commit is most of the cost of a short one (an update and an insert:
73 µs alone, 8 µs each in a transaction of 64, measured on this machine's WAL file), and
every transaction takes the file's write lock. So a burst of short transactions from one
process (a thousand checks claiming their rows, a thousand test resources recording what
they made as their waits end together) is one transaction per turn of the event loop: the
first call of a turn runs at once, alone, and the calls made while it ran or later in the
turn are joined at the loop's next turn.

Each joined call runs in a savepoint of its own and keeps its own outcome: its error
undoes its writes only, and so does its connection's ``rollback()`` (a compare-and-swap
that found the row changed, see ``CallConnection``). Its caller hears its result once
the transaction committed.

A locked file (another connection writing it: the store's own thread, another process)
is tried again on the loop after a short wait, never on a thread: the holder's transaction
lasts about a millisecond. (Handing them to the store's thread, which waits there, kept
that thread taking the lock, and half the calls then found it taken and followed: 5,000
resources took 10-11 s instead of 6.5-7.)
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, TypeVar

from converge.sqlite_inline import Busy, InlineSqlite, is_busy

P = ParamSpec("P")
R = TypeVar("R")

# Waits between two tries at a locked file: short at first, doubling up to the most.
FIRST_RETRY_SECONDS = 0.0005
MOST_RETRY_SECONDS = 0.02
# How long a file may stay locked before the calls waiting for it fail (SQLite's busy
# timeout in the store's own connections is the same).
GIVE_UP_SECONDS = 30.0
# Calls per transaction: enough to share a commit, few enough to keep the lock briefly.
MOST_JOINED = 256
_SAVEPOINT = "joined_call"


class CallConnection(sqlite3.Connection):
    """A connection whose ``rollback()``, inside a joined call, undoes that call only."""

    in_call = False

    def rollback(self) -> None:
        if self.in_call:
            self.execute(f"ROLLBACK TO {_SAVEPOINT}")
        else:
            super().rollback()


@dataclass
class _Call:
    work: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]
    outcome: tuple[bool, Any] = field(default=(False, None))  # (raised, result or error)


class JoinedTransactions:
    """One event loop's calls on one SQLite file, joined per turn of the loop.

    Used from the loop's own thread only (``InlineSqlite`` keeps a connection per thread;
    its connections must be ``CallConnection``s for a call's ``rollback()`` to be its own).
    """

    def __init__(self, inline: InlineSqlite, loop: asyncio.AbstractEventLoop) -> None:
        self._inline = inline
        self.loop = loop
        self._queued: deque[_Call] = deque()
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
        if not (self._queued or self._scheduled):
            # The first call of a turn, at once (a chain's step does not wait a turn); the
            # others of the turn wait for the next one, together.
            self._scheduled = True
            self.loop.call_soon(self._flush)
            with contextlib.suppress(Busy):  # locked: tried again with the others
                return self._inline.run(work, *args, **kwargs)
        future: asyncio.Future[R] = self.loop.create_future()
        self._queued.append(_Call(lambda conn: work(conn, *args, **kwargs), future))
        if not self._scheduled:
            self._scheduled = True
            if self._locked_since is None:
                self.loop.call_soon(self._flush)
            else:
                self.loop.call_later(self._retry_in, self._flush)
        return await future

    def _flush(self) -> None:
        self._scheduled = False
        calls: list[_Call] = []
        while self._queued and len(calls) < MOST_JOINED:
            call = self._queued.popleft()
            if not call.future.done():  # else its caller was cancelled: not run
                calls.append(call)
        if not calls:
            return
        try:
            self._inline.run(_each, calls)
        except Busy:
            self._locked(calls)  # the rest wait with them, not a turn each
            return
        except Exception as exc:  # the transaction failed (its commit): nothing was written
            for call in calls:
                _settle(call.future, (True, exc))
        else:
            self._unlocked()
            for call in calls:
                _settle(call.future, call.outcome)
        if self._queued:  # more than one transaction's worth: the rest at the next turn
            self._scheduled = True
            self.loop.call_soon(self._flush)

    def _locked(self, calls: list[_Call]) -> None:
        """The file was locked: nothing was done. Try ``calls`` again shortly (first,
        with whatever is queued by then); past ``GIVE_UP_SECONDS`` of a locked file, fail
        them."""
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
                _settle(call.future, (True, error))
            if self._queued:  # those that came meanwhile try anew
                self._scheduled = True
                self.loop.call_soon(self._flush)
            return
        self._queued.extendleft(reversed(calls))
        self._scheduled = True
        self.loop.call_later(self._retry_in, self._flush)
        self._retry_in = min(self._retry_in * 2, MOST_RETRY_SECONDS)

    def _unlocked(self) -> None:
        self._locked_since = None
        self._retry_in = FIRST_RETRY_SECONDS


class LoopJoins:
    """The ``JoinedTransactions`` of each event loop using one SQLite file (a store or
    the test world may be used from several loops over its life, one per thread)."""

    def __init__(self, inline: InlineSqlite) -> None:
        self._inline = inline
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, JoinedTransactions]
        self._by_loop = weakref.WeakKeyDictionary()
        self._guard = threading.Lock()
        # The last one asked for: one loop is the common case, found without a lookup
        # (its loop is kept alive as long as it is the last).
        self._last: JoinedTransactions | None = None

    def current(self) -> JoinedTransactions:
        """The running loop's."""
        loop = asyncio.get_running_loop()
        last = self._last
        if last is not None and last.loop is loop:
            return last
        with self._guard:
            joined = self._by_loop.get(loop)
            if joined is None:
                joined = self._by_loop[loop] = JoinedTransactions(self._inline, loop)
        self._last = joined
        return joined


def _each(conn: sqlite3.Connection, calls: list[_Call]) -> None:
    """Each call in a savepoint of its own: an error undoes its writes only. A locked
    file, or a failure to undo, ends the whole transaction (``InlineSqlite`` rolls back)."""
    joined = conn if isinstance(conn, CallConnection) else None
    for call in calls:
        conn.execute(f"SAVEPOINT {_SAVEPOINT}")
        if joined is not None:
            joined.in_call = True
        try:
            call.outcome = (False, call.work(conn))
        except sqlite3.OperationalError as exc:
            if is_busy(exc):
                raise
            call.outcome = (True, exc)
            conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
        except Exception as exc:
            call.outcome = (True, exc)
            conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
        finally:
            if joined is not None:
                joined.in_call = False
        conn.execute(f"RELEASE {_SAVEPOINT}")


def _settle(future: asyncio.Future[Any], outcome: tuple[bool, Any]) -> None:
    if future.done():
        return
    raised, value = outcome
    if raised:
        future.set_exception(value)
    else:
        future.set_result(value)
