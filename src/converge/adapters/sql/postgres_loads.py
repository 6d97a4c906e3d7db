"""The reads of checks started together, as one statement (PostgreSQL's hot path).

A work message names up to a few dozen nodes of one stack and traversal, and the worker
starts their checks at once: each read the stack, its row and its reports in a statement
of its own, so 1,000 leaves cost 1,000 statements before the first claim. Here the reads
of one stack and traversal that wait for the same batch (``postgres_batch``) become one
statement: the stack once, the rows by ``id = ANY(…)``, the reports of the nodes that
wait for some. The statement is made only when the batcher takes it, so a read issued
while it waits joins it and a lone read is sent as soon as before, with the statement it
always had. One statement is one snapshot, as each read alone was; a read commits nothing.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from converge.adapters import json_codec
from converge.adapters.sql.postgres_batch import Row, StatementBatcher
from converge.adapters.sql.postgres_rows import RESOURCE_JSON, STACK_JSON, SYNC_POINT
from converge.errors import StoreError

# (stack, row, reports as (sender id, sender is update, data)): JSON values as read.
Loaded = tuple[dict[str, Any] | None, dict[str, Any] | None, list[tuple[int, bool, Any]]]

_REPORTS_JSON = (
    "(SELECT json_agg(json_build_array(sender_resource_id, sender_is_update, data) "
    f"ORDER BY sender_resource_id, sender_is_update) FROM sync_report WHERE {SYNC_POINT})"
)
_LOAD = f"SELECT {STACK_JSON}, {RESOURCE_JSON}"
_LOAD_WITH_REPORTS = f"{_LOAD}, {_REPORTS_JSON}"
_LOAD_GROUP = (
    f"SELECT {STACK_JSON}, "
    # The ids go through a sub-select: the planner does not know how many, and reads them
    # by index whatever it thinks of the table. Given as a plain array, it chose to scan
    # the table (its statistics from before the traversal's rows were written): 7 ms for
    # a group read of a tree of 3,000, 0.2 ms by index.
    "(SELECT json_agg(row_to_json(r)) FROM resource r "
    "WHERE r.id = ANY(ARRAY(SELECT unnest(%(resource_ids)s::int[])))), "
    "(SELECT json_agg(json_build_array(s.target_resource_id, s.target_is_update, "
    "s.sender_resource_id, s.sender_is_update, s.data) ORDER BY s.target_resource_id, "
    "s.target_is_update, s.sender_resource_id, s.sender_is_update) "
    "FROM json_to_recordset(%(targets)s::json) AS n(rid int, upd boolean) "
    "JOIN sync_report s ON s.traversal_id = %(traversal_id)s "
    "AND s.target_resource_id = n.rid AND s.target_is_update = n.upd "
    # The ids as an array too, through a sub-select as above: joined with the recordset
    # alone, the planner read every report of the traversal.
    "WHERE s.target_resource_id = ANY(ARRAY(SELECT unnest(%(target_ids)s::int[]))))"
)


@dataclass(slots=True)
class _Read:
    resource_id: int
    is_update: bool
    with_reports: bool
    future: asyncio.Future[Loaded] = field(repr=False)


@dataclass(slots=True)
class _Group:
    """The reads of one stack and traversal waiting for the same statement."""

    stack_id: str
    traversal_id: str
    reads: list[_Read] = field(default_factory=list)
    retried: bool = False


class LoadCoalescer:
    """``load_for_check`` on one event loop: concurrent reads of a stack and traversal
    sent as one statement on ``batcher``."""

    def __init__(self, batcher: StatementBatcher) -> None:
        self._batcher = batcher
        self._open: dict[tuple[str, str], _Group] = {}

    async def load(
        self,
        stack_id: str,
        resource_id: int,
        is_update: bool,
        traversal_id: str,
        with_reports: bool,
    ) -> Loaded:
        key = (stack_id, traversal_id)
        read = _Read(
            resource_id, is_update, with_reports, asyncio.get_running_loop().create_future()
        )
        group = self._open.get(key)
        if group is not None:
            group.reads.append(read)
            return await read.future
        group = self._open[key] = _Group(stack_id, traversal_id, [read])
        # The first read waits for the statement itself and hands the others their parts:
        # no hop through a callback, so a lone read takes the loop turns it always took.
        try:
            try:
                row = await self._send(group, order=resource_id)
            except StoreError:
                # As any read: tried again once on a lost connection (one the server
                # dropped since its last use, after a restart).
                group.retried = True
                row = await self._send(group, order=resource_id)
        except asyncio.CancelledError:
            read.future.cancel()
            if any(not other.future.done() for other in group.reads):
                self._send(group, order=resource_id).add_done_callback(
                    partial(self._answered, group)
                )
            raise
        except Exception as exc:
            read.future.cancel()
            _deliver(group, exc)
            raise
        _deliver(group, row)
        return read.future.result()

    def _send(self, group: _Group, *, order: int) -> asyncio.Future[Row]:
        return self._batcher.submit("", {}, order=order, build=partial(self._close, group))

    def _close(self, group: _Group) -> tuple[str, Mapping[str, Any]]:
        """The group's statement, made when the batcher takes it: no read joins after."""
        if self._open.get((group.stack_id, group.traversal_id)) is group:
            del self._open[(group.stack_id, group.traversal_id)]
        group.reads = [read for read in group.reads if not read.future.done()]
        return _statement(group)

    def _answered(self, group: _Group, done: asyncio.Future[Row]) -> None:
        """The others' statement, sent again when the first read was cancelled."""
        error = StoreError("the read was dropped") if done.cancelled() else done.exception()
        if isinstance(error, StoreError) and not group.retried:
            group.retried = True
            self._send(group, order=0).add_done_callback(partial(self._answered, group))
            return
        _deliver(group, done.result() if error is None else error)


def _deliver(group: _Group, outcome: Row | BaseException) -> None:
    """Each read of ``group`` its part of the statement's row, or its error."""
    if isinstance(outcome, BaseException):
        for read in group.reads:
            if not read.future.done():
                read.future.set_exception(outcome)
        return
    assert outcome is not None  # a SELECT of sub-selects always has its one row
    for read, loaded in zip(group.reads, _split(group, outcome), strict=True):
        if not read.future.done():
            read.future.set_result(loaded)


def _statement(group: _Group) -> tuple[str, Mapping[str, Any]]:
    if len(group.reads) == 1:
        (read,) = group.reads
        return (_LOAD_WITH_REPORTS if read.with_reports else _LOAD), {
            "stack_id": group.stack_id,
            "resource_id": read.resource_id,
            "traversal_id": group.traversal_id,
            "target_id": read.resource_id,
            "target_is_update": read.is_update,
        }
    targets = sorted(
        {(read.resource_id, read.is_update) for read in group.reads if read.with_reports}
    )
    return _LOAD_GROUP, {
        "stack_id": group.stack_id,
        "traversal_id": group.traversal_id,
        "resource_ids": sorted({read.resource_id for read in group.reads}),
        "targets": json_codec.dumps([{"rid": rid, "upd": upd} for rid, upd in targets]),
        "target_ids": sorted({rid for rid, _upd in targets}),
    }


def _split(group: _Group, row: tuple[Any, ...]) -> list[Loaded]:
    """Each read's part of the group's row, as its own statement would have read it: its
    own copies of what another read of the group was given too (a caller may change its
    records' JSON values)."""
    if len(group.reads) == 1:
        (read,) = group.reads
        reports = row[2] if read.with_reports and row[2] else []
        return [(row[0], row[1], [(sender, bool(upd), data) for sender, upd, data in reports])]
    stack, rows, reports = row
    by_id = {values["id"]: values for values in rows or ()}
    by_target: dict[tuple[int, bool], list[tuple[int, bool, Any]]] = {}
    for target, target_upd, sender, sender_upd, data in reports or ():
        by_target.setdefault((target, bool(target_upd)), []).append(
            (sender, bool(sender_upd), data)
        )
    loaded: list[Loaded] = []
    given: set[Any] = set()
    for read in group.reads:
        values = by_id.get(read.resource_id)
        target = (read.resource_id, read.is_update)
        found = by_target.get(target, []) if read.with_reports else []
        loaded.append(
            (
                _own(stack, "stack", given),
                _own(values, read.resource_id, given),
                _own(found, target, given),
            )
        )
    return loaded


def _own(value: Any, key: Any, given: set[Any]) -> Any:
    """``value`` the first time ``key`` is given out, a copy after."""
    if key not in given:
        given.add(key)
        return value
    if isinstance(value, dict):  # a row: copy its JSON columns, share its scalars
        return {
            name: copy.deepcopy(v) if isinstance(v, dict | list) else v for name, v in value.items()
        }
    return copy.deepcopy(value)
