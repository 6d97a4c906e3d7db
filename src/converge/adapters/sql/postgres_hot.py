"""The statements of a resource check on PostgreSQL, run on psycopg 3 directly.

Through SQLAlchemy a check cost about twenty round trips on PostgreSQL: three
transactions (read, claim, finish), each with a pool checkout that pings the server, a
BEGIN, one statement per table touched and a COMMIT, each handed to a store thread and
back. Here each of them is one statement, run from the event loop on an async connection
in autocommit mode (``postgres_pool``): the read is one SELECT whose
sub-selects return the stack, the row and the reports as JSON; a claim is one
``UPDATE … RETURNING`` whose events are inserted by a CTE only when the compare-and-swap
won; a finish is one statement that writes the row, its events, its reports and the
successors' counters, and says which successors are now ready. One statement is one
snapshot and one atomic commit, so what SQLAlchemy's transactions guaranteed still holds.
Statements are prepared on their first use (``prepare_threshold=0``).

``tables.py`` stays the one schema: columns and JSON columns are read from it, and rows
come back with the attributes of SQLAlchemy's rows, so ``records.py`` makes records of them
with the same code. The contract tests run every store operation on this path, on
SQLAlchemy's and on SQLite's against the same expectations.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from psycopg.types.json import set_json_loads

from converge.adapters import json_codec
from converge.adapters.sql import tables as t
from converge.adapters.sql.postgres_batch import (
    Joinable,
    OneCounter,
    SharedKey,
    StatementBatcher,
)
from converge.adapters.sql.postgres_loads import LoadCoalescer
from converge.adapters.sql.postgres_pool import Connection, LoopConnections
from converge.adapters.sql.postgres_rows import RESOURCE as _RESOURCE
from converge.adapters.sql.postgres_rows import RESOURCE_JSON as _RESOURCE_JSON
from converge.adapters.sql.postgres_rows import STACK as _STACK
from converge.adapters.sql.postgres_rows import STACK_JSON as _STACK_JSON
from converge.adapters.sql.postgres_rows import SYNC_POINT as _SYNC_POINT
from converge.core.traversal import FanInPart
from converge.errors import StoreError

_NEXT_RESOURCE_JSON = "(SELECT row_to_json(r) FROM resource r WHERE r.id = %(next_id)s)"
_AHEAD_RESOURCE_JSON = "(SELECT row_to_json(r) FROM resource r WHERE r.id = %(ahead_id)s)"
_SELECT_STACK = f"SELECT {_STACK_JSON}"
_SELECT_RESOURCE = f"SELECT {_RESOURCE_JSON}"
_FIND_STACK = (
    f"SELECT row_to_json(s) FROM (SELECT {', '.join(_STACK.columns)} FROM stack "
    "WHERE project_id = %(project_id)s AND (name = %(name_or_id)s OR id = %(name_or_id)s)"
    "{live} ORDER BY created_at DESC LIMIT 1) s"
)
_EVENT_COLUMNS = [c.name for c in t.event.c if c.name not in ("id", "stack_id", "created_at")]
# Events come as one JSON array: any number of them, one statement text to prepare.
_EVENTS_FROM_JSON = (
    f"SELECT %(stack_id)s, {', '.join(f'e.{c}' for c in _EVENT_COLUMNS)}, %(now)s "
    f"FROM json_to_recordset(%(events)s::json) AS e("
    + ", ".join(f"{c} text" for c in _EVENT_COLUMNS)
    + ")"
)
_INSERT_EVENTS = (
    f"INSERT INTO event (stack_id, {', '.join(_EVENT_COLUMNS)}, created_at) {_EVENTS_FROM_JSON}"
)


class PostgresHotPath:
    """The hot statements, each one round trip on a connection of the running loop."""

    def __init__(self, conninfo: str, size: int) -> None:
        self._conninfo = conninfo
        self._size = size
        self._pools: dict[asyncio.AbstractEventLoop, LoopConnections] = {}
        self._batchers: dict[asyncio.AbstractEventLoop, StatementBatcher] = {}
        self._loads: dict[asyncio.AbstractEventLoop, LoadCoalescer] = {}
        self._statements: dict[tuple[Any, ...], str] = {}

    def _pool(self) -> LoopConnections:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            for other in [other for other in self._pools if other.is_closed()]:
                self._pools.pop(other).close_from_elsewhere()
                self._batchers.pop(other, None)
                self._loads.pop(other, None)
            pool = self._pools[loop] = LoopConnections(self._conninfo, self._size, _configure)
        return pool

    def _batcher(self) -> StatementBatcher:
        pool = self._pool()
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = StatementBatcher(pool, self._size)
        return batcher

    def _coalescer(self) -> LoadCoalescer:
        batcher = self._batcher()
        loads = self._loads.get(asyncio.get_running_loop())
        if loads is None:
            loads = self._loads[asyncio.get_running_loop()] = LoadCoalescer(batcher)
        return loads

    async def close(self) -> None:
        """Close every connection: this loop's once their statements end, other loops'
        idle ones at once."""
        pools, self._pools = self._pools, {}
        self._batchers = {}
        self._loads = {}
        loop = asyncio.get_running_loop()
        for owner, pool in pools.items():
            if owner is loop:
                await pool.close()
            else:
                pool.close_from_elsewhere()

    async def _one(
        self, sql: str, params: Mapping[str, Any], *, order: int = 0, shared: SharedKey = None
    ) -> tuple[Any, ...] | None:
        """The statement's first row, sent with whatever other statements wait
        (``postgres_batch``): ``order``, the resource id it touches; ``shared``, the rows
        other checks lock too that it locks (``SharedKey``)."""
        return await self._batcher().run(sql, params, order=order, shared=shared)

    async def _read(
        self, sql: str, params: Mapping[str, Any], *, order: int = 0
    ) -> tuple[Any, ...] | None:
        """A read: tried again once on a lost connection (one the server dropped since its
        last use, after a restart). Writes are not: one may have committed before the
        connection was lost, and it is the caller's compare-and-swap to decide."""
        try:
            return await self._one(sql, params, order=order)
        except StoreError:
            return await self._one(sql, params, order=order)

    async def _write(self, sql: str, params: Mapping[str, Any]) -> None:
        await self._one(sql, params)

    def _statement(self, key: tuple[Any, ...], build: Callable[[], str]) -> str:
        sql = self._statements.get(key)
        if sql is None:
            sql = self._statements[key] = build()
        return sql

    # --- reads -------------------------------------------------------------------------

    async def stack(self, stack_id: str) -> Any | None:
        found = await self._read(_SELECT_STACK, {"stack_id": stack_id})
        return None if found is None else _STACK.row(found[0])

    async def find_stack(
        self, name_or_id: str, project_id: str, include_deleted: bool
    ) -> Any | None:
        """The project's newest stack with this name or id (live ones only, unless asked)."""
        live = "" if include_deleted else " AND deleted_marker = ''"
        sql = self._statement(("find", live), lambda: _FIND_STACK.replace("{live}", live))
        found = await self._read(sql, {"project_id": project_id, "name_or_id": name_or_id})
        return None if found is None else _STACK.row(found[0])

    async def resource(self, resource_id: int) -> Any | None:
        found = await self._read(_SELECT_RESOURCE, {"resource_id": resource_id}, order=resource_id)
        return None if found is None else _RESOURCE.row(found[0])

    async def load_for_check(
        self,
        stack_id: str,
        resource_id: int,
        is_update: bool,
        traversal_id: str,
        with_reports: bool,
    ) -> tuple[Any | None, Any | None, list[tuple[int, bool, Any]]]:
        """Stack, resource row and the node's reports, read in one snapshot (with the
        reads of other checks of the stack and traversal: ``postgres_loads``)."""
        stack, row, reports = await self._coalescer().load(
            stack_id, resource_id, is_update, traversal_id, with_reports
        )
        return _STACK.row(stack), _RESOURCE.row(row), reports

    async def count_reports(self, traversal_id: str, resource_id: int, is_update: bool) -> int:
        found = await self._read(
            f"SELECT count(*) FROM sync_report WHERE {_SYNC_POINT}",
            {"traversal_id": traversal_id, "target_id": resource_id, "target_is_update": is_update},
        )
        return 0 if found is None else int(found[0])

    # --- writes ------------------------------------------------------------------------

    async def add_events(
        self, stack_id: str, events: Sequence[Mapping[str, Any]], now: float
    ) -> None:
        if events:
            await self._write(_INSERT_EVENTS, _event_params(stack_id, events, now))

    async def update_resource(
        self,
        resource_id: int,
        expected_key: int,
        values: Mapping[str, Any],
        stack_id: str | None,
        events: Sequence[Mapping[str, Any]],
        now: float,
        *,
        read_back: bool,
    ) -> tuple[bool, Any | None]:
        """Compare-and-swap the row (``values`` are its new columns) and add ``events``
        only if it won; (won, the row as written when ``read_back``)."""
        names = tuple(values)
        with_events = bool(events and stack_id)
        sql = self._statement(
            ("cas", names, with_events, read_back),
            lambda: _cas_statement(names, with_events, read_back),
        )

        def alone() -> tuple[str, dict[str, Any]]:
            params = _cas_params(resource_id, expected_key, values)
            if with_events:
                assert stack_id is not None
                params.update(_event_params(stack_id, events, now))
            return sql, params

        if read_back:
            found = await self._one(*alone(), order=resource_id)
        else:  # sent with the others of its kind in the batch as one (a busy worker's claims)
            kind = ("cas-joined", names)
            row = {
                "rid": resource_id,
                "akey": expected_key,
                "vals": values,
                "stack_id": stack_id,
                "ts": now,
                "evs": _event_rows(events) if with_events else [],
            }
            joined = self._statement(kind, lambda: _cas_joined_statement(names))
            found = await self._batcher().run(
                "",
                {},
                order=resource_id,
                build=alone,
                joinable=Joinable(kind, row, partial(_joined_params, joined)),
            )
        if found is None:
            return False, None
        return True, _RESOURCE.row(found[0]) if read_back else None

    async def finish_node(
        self,
        *,
        stack_id: str,
        traversal_id: str,
        sender: tuple[int, bool],
        resource: tuple[int, int] | None,
        values: Mapping[str, Any] | None,
        delete: bool,
        kept: Mapping[str, Any] | None,
        events: Sequence[Mapping[str, Any]],
        targets: Sequence[tuple[int, bool, Mapping[str, Any], int, FanInPart | None]],
        now: float,
        load_next: tuple[int, bool] | None = None,
        claim_next: tuple[int, int, Mapping[str, Any], Sequence[Mapping[str, Any]]] | None = None,
        read_ahead: int | None = None,
    ) -> tuple[
        bool,
        list[tuple[int, bool]],
        str,
        tuple[Any | None, Any | None] | None,
        Any | None,
        Any | None,
    ]:
        """Store a node's result and report it to its successors in one statement.

        ``resource``: (id, expected key) to write, with ``values`` (compare-and-swap) or
        ``delete``; ``kept``: with ``delete``, the values written instead of deleting when
        the stack's current traversal is no longer ``traversal_id``. ``targets``:
        (resource id, is update, report data, expected count, the sender's group when the
        target's counter is split), in the order every sender uses (counters are locked in
        that order: no deadlock). Returns (stored, the targets now ready, the stack's
        current traversal, the stack and resource rows of ``load_next``), as
        ``SqlStore.finish_node``.

        ``load_next``: a target waiting for this one report (expected count 1) whose stack
        and row the statement reads too (a variant prepared apart), in the statement's
        snapshot: taken when it began, so without this statement's own writes. They come
        back only when this statement made the target ready with the first report it
        got (a repeated report finds the first one stored, which may say otherwise).

        ``claim_next``: (id, expected key, new columns, events) of a compare-and-swap of
        the row of ``load_next``, made only when this finish is stored, makes that target
        ready, and finds the traversal still current (``Store.finish_node``); the row as
        claimed comes back (fifth), or None. ``read_ahead``: the id of a row read in the
        statement's snapshot, returned sixth.
        """
        written = kept if delete and kept is not None else None if delete else values
        mode = _finish_mode(resource is not None, delete, kept is not None, values is not None)
        names = tuple(written or ())
        loads = load_next is not None
        claims = tuple(claim_next[2]) if claim_next is not None and loads else None
        ahead = read_ahead is not None and loads
        counted_here = any(expected > 1 for _rid, _upd, _data, expected, _part in targets)
        sql = self._statement(
            ("finish", mode, names, loads, counted_here, claims, ahead),
            lambda: _finish_statement(mode, names, loads, counted_here, claims, ahead),
        )

        def alone() -> tuple[str, dict[str, Any]]:
            params: dict[str, Any] = {
                "stack_id": stack_id,
                "traversal_id": traversal_id,
                "sender_id": sender[0],
                "sender_is_update": sender[1],
                "targets": json_codec.dumps(
                    [
                        {
                            "rid": rid,
                            "upd": upd,
                            "data": data,
                            "expected": expected,
                            "pos": pos,
                            "part": part.part if part else 0,
                            "psize": part.size if part else 0,
                            "parts": part.parts if part else 0,
                        }
                        for pos, (rid, upd, data, expected, part) in enumerate(targets)
                    ]
                ),
            }
            params.update(_event_params(stack_id, events, now))
            if counted_here:
                params["counted_ids"] = sorted(
                    {rid for rid, _upd, _data, expected, _part in targets if expected > 1}
                )
            if resource is not None:
                params.update(_cas_params(resource[0], resource[1], written or {}))
            if load_next is not None:
                params["next_id"] = load_next[0]
                params["next_is_update"] = load_next[1]
            if claims is not None:
                assert claim_next is not None
                next_id, next_key, next_values, next_events = claim_next
                assert load_next is not None and next_id == load_next[0]  # its row only
                params["next_key"] = next_key
                params["next_values"] = json_codec.dumps(next_values)
                params["next_events"] = json_codec.dumps(_event_rows(next_events))
            if ahead:
                params["ahead_id"] = read_ahead
            return sql, params

        shared = _shared_key(targets)
        if mode == "cas" and not loads and isinstance(shared, tuple) and len(targets) == 1:
            # One of many finishes into one group of a big fan-in: joined with the others
            # of the batch (``_finish_joined_statement``).
            assert resource is not None and values is not None
            rid, upd, data, _expected, part = targets[0]
            assert part is not None
            kind = ("finish-joined", names, stack_id, traversal_id, rid, upd, part)
            joined = self._statement(("finish-joined", names), lambda: _finish_joined(names))
            member = {
                "rid": resource[0],
                "akey": resource[1],
                "vals": values,
                "stack_id": stack_id,
                "sid": sender[0],
                "supd": sender[1],
                "evs": _event_rows(events),
                "data": data,
                "ts": now,
            }
            statement = {
                "stack_id": stack_id,
                "traversal_id": traversal_id,
                "target_id": rid,
                "target_is_update": upd,
                "part": part.part,
                "psize": part.size,
            }
            found = await self._batcher().run(
                "",
                {},
                order=sender[0],
                shared=shared,
                build=alone,
                joinable=Joinable(
                    kind,
                    member,
                    partial(_finish_joined_params, joined, statement),
                    partial(_finish_joined_split, (rid, upd)),
                ),
            )
        else:
            found = await self._one(*alone(), order=sender[0], shared=shared)
        assert found is not None  # the final SELECT always has its one row
        stored, current, new, counted, received = found[:5]
        extra = list(found[7:] if loads else ())
        claimed_row = extra.pop(0) if claims is not None else None
        ahead_row = extra.pop(0) if ahead else None
        if not stored:
            return False, [], "", None, None, None
        is_new = {(rid, bool(upd)) for rid, upd in new or ()}
        counts = {(rid, bool(upd)): n for rid, upd, n in counted or ()}
        seen = {(rid, bool(upd)): n for rid, upd, n in received or ()}
        ready = []
        for rid, upd, _data, expected, part in targets:
            key = (rid, upd)
            needed = expected if part is None else part.parts
            if expected <= 1:
                ready.append(key)  # waiting for one report, this one: nobody to race
            elif key in is_new:
                if counts.get(key, 0) >= needed:
                    ready.append(key)
            elif seen.get(key, 0) >= needed:
                ready.append(key)  # a repeated report re-announces a complete target
        loaded = None
        expects = {(rid, upd): expected for rid, upd, _data, expected, _part in targets}
        if load_next is not None and load_next in is_new and expects.get(load_next) == 1:
            loaded = (_STACK.row(found[5]), _RESOURCE.row(found[6]))
        claimed = None if claimed_row is None or loaded is None else _RESOURCE.row(claimed_row)
        return True, ready, current or "", loaded, claimed, _RESOURCE.row(ahead_row)


def _shared_key(
    targets: Sequence[tuple[int, bool, Mapping[str, Any], int, FanInPart | None]],
) -> SharedKey:
    """What rows of other checks' the finish locks (``postgres_batch``): none when every
    target waits for this report only; the counter of one group of one big fan-in (many
    such finishes can share a batch); one target's counter (so can finishes that each
    lock one); or several sync points' counters."""
    shared = [(rid, upd, part) for rid, upd, _data, expected, part in targets if expected > 1]
    if not shared:
        return None
    if len(shared) == 1:
        rid, upd, part = shared[0]
        return OneCounter((rid, upd)) if part is None else (rid, upd, part.part)
    return True


def _configure(conn: Connection) -> None:
    set_json_loads(json_codec.loads, conn)


# --- statements ----------------------------------------------------------------------


def _cas_params(resource_id: int, expected_key: int, values: Mapping[str, Any]) -> dict[str, Any]:
    # The new columns travel as one JSON object (``json_populate_record`` types them):
    # one parameter to adapt instead of one per column, JSON columns included.
    return {
        "values": json_codec.dumps(values),
        "resource_id": resource_id,
        "expected_key": expected_key,
    }


def _event_params(stack_id: str, events: Sequence[Mapping[str, Any]], now: float) -> dict[str, Any]:
    return {"stack_id": stack_id, "now": now, "events": json_codec.dumps(_event_rows(events))}


def _event_rows(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [{c: event[c] for c in _EVENT_COLUMNS} for event in events]


def _joined_params(sql: str, rows: Sequence[Mapping[str, Any]]) -> tuple[str, Mapping[str, Any]]:
    """A joined statement (``Joinable``) and its one parameter: every row, numbered."""
    return sql, {"rows": json_codec.dumps([{**row, "i": i} for i, row in enumerate(rows)])}


def _known(names: Sequence[str]) -> Sequence[str]:
    unknown = set(names) - set(_RESOURCE.columns)
    if unknown:
        raise ValueError(f"resource has no column {sorted(unknown)}")
    return names


def _assignments(names: Sequence[str], param: str = "values", alias: str = "v") -> str:
    assigned = ", ".join(f"{name} = {alias}.{name}" for name in _known(names))
    return f"{assigned} FROM json_populate_record(NULL::resource, %({param})s::json) AS {alias}"


_ROW_KEY = "resource.id = %(resource_id)s AND resource.atomic_key = %(expected_key)s"


def _cas_statement(names: Sequence[str], with_events: bool, read_back: bool) -> str:
    returning = "resource.*" if read_back else "resource.id"
    result = "row_to_json(won)" if read_back else "1"
    events = (
        f", ev AS (INSERT INTO event (stack_id, {', '.join(_EVENT_COLUMNS)}, created_at) "
        f"{_EVENTS_FROM_JSON} WHERE EXISTS (SELECT 1 FROM won))"
        if with_events
        else ""
    )
    return (
        f"WITH won AS (UPDATE resource SET {_assignments(names)} WHERE {_ROW_KEY} "
        f"RETURNING {returning}){events} SELECT {result} FROM won"
    )


def _finish_joined(names: Sequence[str]) -> str:
    """Finishes of several rows that each report to one and the same group of a big
    fan-in, as one statement: each row's compare-and-swap (its events and its report
    stored only when it won), the group's counter incremented once by the number of new
    reports, and the target's by one when that completed the group (as the lone finish
    does, ``_finish_statement``). It returns the positions of the rows written, the
    stack's current traversal, the senders whose report was new, the target's counter as
    this statement left it when it incremented it, and as it was before."""
    target = "%(traversal_id)s, %(target_id)s, %(target_is_update)s"  # a sync point's key
    return (
        _joined_writes(names, "sid int, supd boolean, data json", "v.sid, v.supd, v.data")
        + ", rep AS (INSERT INTO sync_report (traversal_id, target_resource_id, "
        "target_is_update, sender_resource_id, sender_is_update, stack_id, data) "
        f"SELECT {target}, w.sid, w.supd, w.stack_id, w.data FROM w ORDER BY w.sid "
        "ON CONFLICT DO NOTHING RETURNING sender_resource_id, sender_is_update), "
        "pc AS (INSERT INTO sync_part (traversal_id, target_resource_id, target_is_update, "
        f"part, stack_id, received) SELECT {target}, %(part)s, %(stack_id)s, count(*) "
        "FROM rep HAVING count(*) > 0 "
        "ON CONFLICT (traversal_id, target_resource_id, target_is_update, part) "
        "DO UPDATE SET received = sync_part.received + EXCLUDED.received "
        "RETURNING received), "
        "cnt AS (INSERT INTO sync_point (traversal_id, target_resource_id, target_is_update, "
        f"stack_id, received) SELECT {target}, %(stack_id)s, 1 FROM pc "
        "WHERE pc.received = %(psize)s "
        "ON CONFLICT (traversal_id, target_resource_id, target_is_update) "
        "DO UPDATE SET received = sync_point.received + 1 RETURNING received) "
        f"SELECT (SELECT json_agg(i) FROM w), {_CURRENT}, "
        "(SELECT json_agg(json_build_array(sender_resource_id, sender_is_update)) FROM rep), "
        "(SELECT received FROM cnt), "
        "(SELECT p.received FROM sync_point p WHERE p.traversal_id = %(traversal_id)s "
        "AND p.target_resource_id = %(target_id)s AND p.target_is_update = %(target_is_update)s)"
    )


def _finish_joined_params(
    sql: str, statement: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> tuple[str, Mapping[str, Any]]:
    return sql, {**_joined_params(sql, rows)[1], **statement}


def _finish_joined_split(
    target: tuple[int, bool], found: tuple[Any, ...] | None, rows: Sequence[Mapping[str, Any]]
) -> list[tuple[Any, ...] | None]:
    """Each joined finish's own result, as its lone statement's would be: stored or not;
    its report new or repeated; the target's count made by the first new one only (the one
    that fires it, when the count is complete), as had they run one after the other."""
    assert found is not None
    written, current, new, counted, before = found
    written = set(written or ())
    new_senders = {(sid, bool(upd)) for sid, upd in new or ()}
    rid, upd = target
    results: list[tuple[Any, ...] | None] = []
    counter_told = False
    for position, row in enumerate(rows):
        if position not in written:
            results.append((False, current, None, None, None))
            continue
        is_new = (row["sid"], bool(row["supd"])) in new_senders
        count = None
        if is_new and counted is not None and not counter_told:
            count, counter_told = [[rid, upd, counted]], True
        seen = None if before is None else [[rid, upd, before]]
        results.append((True, current, [[rid, upd]] if is_new else None, count, seen))
    return results


def _cas_joined_statement(names: Sequence[str]) -> str:
    """The compare-and-swaps of several rows, each with its own expected key (and its
    events, inserted only when it won), as one statement: its one value lists the
    positions of the rows it wrote (``postgres_batch.Joinable``). A row given twice is
    written at most once (PostgreSQL's UPDATE … FROM), as two compare-and-swaps of one
    key would."""
    return _joined_writes(names) + " SELECT (SELECT json_agg(i) FROM w)"


def _joined_writes(names: Sequence[str], more: str = "", returned: str = "") -> str:
    """The start of a joined statement: ``v``, its rows (``%(rows)s``: each with the
    position ``i``, the row's id ``rid``, expected key ``akey``, new values ``vals``, the
    stack ``stack_id``, the time ``ts`` and events ``evs``, and ``more`` columns), ``w``,
    those whose compare-and-swap won (with ``returned`` columns of ``v``), and ``ev``, the
    events of those. The statement's own parts follow."""
    columns = ", ".join(f"{c} text" for c in _EVENT_COLUMNS)
    extra = f", {more}" if more else ""
    returning = f", {returned}" if returned else ""
    return (
        "WITH v AS (SELECT * FROM json_to_recordset(%(rows)s::json) AS v(i int, rid int, "
        f"akey int, vals json, stack_id text, ts double precision, evs json{extra})), "
        f"w AS (UPDATE resource SET {', '.join(f'{n} = x.{n}' for n in _known(names))} "
        "FROM v CROSS JOIN LATERAL json_populate_record(NULL::resource, v.vals) AS x "
        # The ids as an array too: an index scan for them, whatever the planner thinks
        # of the table (a hash join over it read 10,000 rows for 64 claims).
        "WHERE resource.id = ANY(ARRAY(SELECT rid FROM v)) "
        "AND resource.id = v.rid AND resource.atomic_key = v.akey "
        f"RETURNING v.i, v.stack_id, v.ts, v.evs{returning}), "
        f"ev AS (INSERT INTO event (stack_id, {', '.join(_EVENT_COLUMNS)}, created_at) "
        f"SELECT w.stack_id, {', '.join(f'e.{c}' for c in _EVENT_COLUMNS)}, w.ts "
        f"FROM w CROSS JOIN LATERAL json_to_recordset(w.evs) AS e({columns}))"
    )


def _finish_mode(has_row: bool, delete: bool, has_kept: bool, has_values: bool) -> str:
    """What a finish writes to its row (as ``SqlStore._finish_node`` decides)."""
    if not has_row:
        return "none"
    if delete:
        return "kept" if has_kept else "delete"
    return "cas" if has_values else "none"


# The stack's current traversal as a finish reads it: locked, not from the statement's
# snapshot. A newer traversal's check that finds the row still claimed leaves it to this
# finish to hand the row on; the finish must then see that traversal, or neither side acts
# (a lost trigger: two workers of concurrent updates left a node for the sweeper). A
# traversal starts with the stack locked FOR UPDATE, so this read waits for it to commit
# and reads it (READ COMMITTED follows the row to its newest version); or it came first,
# and the start waits for this statement's commit, after which the newer checks find the
# row released. KEY SHARE: finishes do not wait for each other.
_CURRENT = "(SELECT current_traversal FROM stack WHERE id = %(stack_id)s FOR KEY SHARE)"
_TARGET_KEY = "p.target_resource_id = g.rid AND p.target_is_update = g.upd"


def _finish_statement(
    mode: str,
    names: Sequence[str],
    loads_next: bool = False,
    counts: bool = True,
    claims: Sequence[str] | None = None,
    reads_ahead: bool = False,
) -> str:
    """The finish as one statement: every write depends on ``ok`` (the row's
    compare-and-swap won, or there was no row to write), like a rolled-back transaction.
    ``loads_next``: the final SELECT also reads the stack and the row ``next_id``.
    ``counts``: some target waits for more than this report, so its counters are kept;
    without, a variant with none of them (a chain's link: a smaller plan to run).
    ``claims``: the columns of a claim of ``next_id`` (``_CLAIM_NEXT``), whose row as
    claimed the final SELECT returns next; ``reads_ahead``: then the row ``ahead_id``."""
    current = _CURRENT
    writes = {
        "none": "",
        "cas": f"w AS (UPDATE resource SET {_assignments(names)} WHERE {_ROW_KEY} RETURNING 1), ",
        "delete": f"w AS (DELETE FROM resource WHERE {_ROW_KEY} RETURNING 1), ",
        # Superseded: the newer traversal may have chosen the row, so it is kept.
        "kept": (
            f"kw AS (UPDATE resource SET {_assignments(names)} WHERE {_ROW_KEY} "
            f"AND {current} IS DISTINCT FROM %(traversal_id)s RETURNING 1), "
            f"dw AS (DELETE FROM resource WHERE {_ROW_KEY} "
            f"AND {current} = %(traversal_id)s RETURNING 1), "
            "w AS (SELECT 1 FROM kw UNION ALL SELECT 1 FROM dw), "
        ),
    }[mode]
    ok = "true" if mode == "none" else "EXISTS (SELECT 1 FROM w)"
    return (
        f"WITH {writes}ok AS (SELECT {ok} AS ok), "
        f"ev AS (INSERT INTO event (stack_id, {', '.join(_EVENT_COLUMNS)}, created_at) "
        f"{_EVENTS_FROM_JSON} WHERE (SELECT ok FROM ok)), "
        "g AS (SELECT * FROM json_to_recordset(%(targets)s::json) "
        "AS g(rid int, upd boolean, data json, expected int, pos int, part int, psize int, "
        "parts int)), "
        "rep AS (INSERT INTO sync_report (traversal_id, target_resource_id, target_is_update, "
        "sender_resource_id, sender_is_update, stack_id, data) "
        "SELECT %(traversal_id)s, g.rid, g.upd, %(sender_id)s, %(sender_is_update)s, "
        "%(stack_id)s, g.data FROM g WHERE (SELECT ok FROM ok) ORDER BY g.pos "
        "ON CONFLICT DO NOTHING RETURNING target_resource_id, target_is_update)"
        + (_COUNTERS if counts else " ")
        + (_claim_next(claims) if claims is not None else "")
        + f"SELECT (SELECT ok FROM ok), {current}, "
        "(SELECT json_agg(json_build_array(target_resource_id, target_is_update)) FROM rep), "
        + (_COUNTED if counts else "NULL, NULL")
        + (f", {_STACK_JSON}, {_NEXT_RESOURCE_JSON}" if loads_next else "")
        + (", (SELECT row_to_json(nc) FROM nc)" if claims is not None else "")
        + (f", {_AHEAD_RESOURCE_JSON}" if reads_ahead else "")
    )


def _claim_next(names: Sequence[str]) -> str:
    """A finish's claim of the next link (``claims``): the row's compare-and-swap, made
    only when the finish is stored (``ok``), its report to that row is new (the row's one
    predecessor: it is ready now) and the traversal is still current (read locked, as the
    final SELECT reads it); the claim's events only when it won. One commit then holds a
    link's finish and the next link's claim, which a check makes before it acts."""
    return (
        f", nc AS (UPDATE resource SET {_assignments(names, 'next_values', 'nv')} "
        "WHERE resource.id = %(next_id)s AND resource.atomic_key = %(next_key)s "
        "AND (SELECT ok FROM ok) AND EXISTS (SELECT 1 FROM rep "
        "WHERE rep.target_resource_id = %(next_id)s "
        "AND rep.target_is_update = %(next_is_update)s) "
        f"AND {_CURRENT} = %(traversal_id)s RETURNING resource.*), "
        f"nev AS (INSERT INTO event (stack_id, {', '.join(_EVENT_COLUMNS)}, created_at) "
        + _EVENTS_FROM_JSON.replace("%(events)s", "%(next_events)s")
        + " WHERE EXISTS (SELECT 1 FROM nc)) "
    )


# A finish's counters (``_finish_statement``, when a target waits for several reports):
_COUNTERS = (
    ", "
    # Only a first report counts; the upsert's row lock serializes racing reporters.
    # A big fan-in's report counts in its group's row first (``sync_part``).
    "pc AS (INSERT INTO sync_part (traversal_id, target_resource_id, target_is_update, "
    "part, stack_id, received) SELECT %(traversal_id)s, g.rid, g.upd, g.part, "
    f"%(stack_id)s, 1 FROM g JOIN rep p ON {_TARGET_KEY} WHERE g.parts > 0 "
    "ORDER BY g.pos ON CONFLICT (traversal_id, target_resource_id, target_is_update, "
    "part) DO UPDATE SET received = sync_part.received + 1 "
    "RETURNING target_resource_id, target_is_update, received), "
    # Every group row is locked before any target's row (the scalar sub-select reads
    # ``pc`` to its end first), as ``sync_points`` does: one lock order for all.
    "cnt AS (INSERT INTO sync_point (traversal_id, target_resource_id, target_is_update, "
    "stack_id, received) SELECT %(traversal_id)s, g.rid, g.upd, %(stack_id)s, 1 "
    f"FROM g JOIN rep p ON {_TARGET_KEY} WHERE g.expected > 1 "
    "AND (SELECT count(*) FROM pc) >= 0 AND (g.parts = 0 OR EXISTS (SELECT 1 FROM pc "
    "WHERE pc.target_resource_id = g.rid AND pc.target_is_update = g.upd "
    "AND pc.received = g.psize)) ORDER BY g.pos "
    "ON CONFLICT (traversal_id, target_resource_id, target_is_update) "
    "DO UPDATE SET received = sync_point.received + 1 "
    "RETURNING target_resource_id, target_is_update, received) "
)
# ... and what they say: the counts this finish made, and every counted target's count.
_COUNTED = (
    "(SELECT json_agg(json_build_array(target_resource_id, target_is_update, received)) "
    "FROM cnt), "
    "(SELECT json_agg(json_build_array(p.target_resource_id, p.target_is_update, "
    f"p.received)) FROM sync_point p JOIN g ON {_TARGET_KEY} "
    "WHERE p.traversal_id = %(traversal_id)s AND g.expected > 1 "
    # The ids as an array too, through a sub-select (``postgres_loads``): an index scan
    # for them, not every counter of the traversal.
    "AND p.target_resource_id = ANY(ARRAY(SELECT unnest(%(counted_ids)s::int[]))))"
)
