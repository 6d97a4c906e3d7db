"""The SQL store: SQLite (embedded default) or PostgreSQL through SQLAlchemy Core.

Each public coroutine is one short transaction run on the store's own threads: one thread
for SQLite (its single writer, so transactions never wait on each other's locks), a small
pool for PostgreSQL. Rows that workers race on (stack, resource) are written with
compare-and-swap on ``atomic_key``; sync point reports are keyed by sender so a duplicate
counts once.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command

from converge.adapters.sql import leases, state_file
from converge.adapters.sql import tables as t
from converge.adapters.sql.connection import Conn, create_engine, fatal_error, safe_url
from converge.adapters.sql.entities import EntityStore
from converge.adapters.sql.records import event_rows, resource_record, stack_found
from converge.adapters.sql.schema import MIGRATIONS, SchemaMixin, alembic_config
from converge.adapters.sql.stacks import StacksMixin
from converge.adapters.sql.sync_points import SyncPointsMixin
from converge.core.traversal import GraphNode
from converge.errors import StoreError
from converge.records import NewEvent, Report, ResourceRecord, ServiceRecord, StackRecord

# Imported from here by other modules and tests, from before the store was split by
# concept (the migration tests patch Alembic's ``command`` and make engines here).
__all__ = ["MIGRATIONS", "SqlStore", "_alembic_config", "_create_engine", "command", "sqlite_url"]
_alembic_config = alembic_config
_create_engine = create_engine


def sqlite_url(path: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(path).resolve()}"


class SqlStore(StacksMixin, SyncPointsMixin, SchemaMixin):
    """The store port over a SQLAlchemy engine."""

    # --- lifecycle -------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, clock: Callable[[], float] = time.time) -> SqlStore:
        """Connect, bring the schema up to date if it is behind, and return the store."""
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///file:"):
            path = url[len("sqlite:///") :]
            if path and path != ":memory:":
                return cls.open_file(path, clock=clock)
        return cls._open_url(url, safe_url(url), clock=clock, read_only=False)

    @classmethod
    def open_file(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        read_only: bool = False,
    ) -> SqlStore:
        """The embedded state file: checked first (``state_file.prepare``), made if missing.

        ``read_only`` opens it for reading alone (SQLite's ``mode=ro``): no file is made,
        no migration runs, and a read-only file or disk is fine.
        """
        state = state_file.prepare(path, create=not read_only)
        if read_only:
            url = f"sqlite:///{state_file.read_only_uri(state)}&uri=true"
        else:
            url = f"sqlite:///{state}"
        return cls._open_url(url, str(state), clock=clock, read_only=read_only)

    @classmethod
    def _open_url(
        cls, url: str, location: str, *, clock: Callable[[], float], read_only: bool
    ) -> SqlStore:
        store: SqlStore | None = None
        try:
            engine = create_engine(url, read_only=read_only)
            store = cls(engine, clock=clock, location=location)
            store._bring_schema_up_to_date(read_only=read_only)
        except sa.exc.DBAPIError as exc:
            if store is not None:
                store._discard()
            fatal = fatal_error(location, exc.orig)
            if fatal is not None:
                raise fatal from exc
            raise StoreError(f"cannot open the database {location}: {exc.orig}") from exc
        except BaseException:
            if store is not None:
                store._discard()
            raise
        return store

    @functools.cached_property
    def entities(self) -> EntityStore:
        """The synchronizer's baseline, in the same database and on the same threads."""
        return EntityStore(self)

    # --- resources -------------------------------------------------------------------

    async def load_for_check(
        self, stack_id: str, node: GraphNode, traversal_id: str, *, with_reports: bool = True
    ) -> tuple[StackRecord, ResourceRecord | None, list[Report]]:
        """Everything a worker reads before deciding: stack, resource, sync point reports
        (none read when ``with_reports`` is False: a node that waits for nothing)."""
        if self._pg is not None:
            stack, row, found = await self._pg.load_for_check(
                stack_id,
                node.resource_id,
                node.is_update,
                traversal_id,
                with_reports,
            )
            reports = [Report(sender, is_update, data) for sender, is_update, data in found]
            resource = None if row is None else resource_record(row)
            return stack_found(stack, stack_id), resource, reports
        return await self._short(self._load_for_check, stack_id, node, traversal_id, with_reports)

    def _load_for_check(
        self, conn: Conn, stack_id: str, node: GraphNode, traversal_id: str, with_reports: bool
    ) -> tuple[StackRecord, ResourceRecord | None, list[Report]]:
        stack = self._stack_by_id(conn, stack_id)
        resource = self._resource_by_id(conn, node.resource_id)
        reports = self._reports(conn, traversal_id, node) if with_reports else []
        return stack, resource, reports

    async def finish_node(
        self,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        *,
        resource_id: int | None,
        expected_key: int | None,
        changes: Mapping[str, Any] | None,
        delete_resource: bool = False,
        events: Sequence[NewEvent] = (),
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        kept_if_superseded: Mapping[str, Any] | None = None,
    ) -> tuple[bool, list[GraphNode], str]:
        """Store a node's result and report it to its successors in one transaction.

        Returns (stored, successors now ready, the stack's current traversal). ``stored``
        is False when the resource row changed under us (nothing is written then).
        ``kept_if_superseded``: a row to delete is kept with these changes instead when
        the traversal is no longer current (the newer one may have chosen the row).
        """
        args = (
            stack_id,
            traversal_id,
            sender,
            resource_id,
            expected_key,
            changes,
            delete_resource,
            events,
            reports,
            expected_counts,
            kept_if_superseded,
        )
        if self._pg is not None:
            return await self._pg_finish_node(*args)
        return await self._short(self._finish_node, *args)

    def _finish_node(
        self,
        conn: Conn,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        resource_id: int | None,
        expected_key: int | None,
        changes: Mapping[str, Any] | None,
        delete_resource: bool,
        events: Sequence[NewEvent],
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        kept_if_superseded: Mapping[str, Any] | None = None,
    ) -> tuple[bool, list[GraphNode], str]:
        if resource_id is not None and expected_key is not None:
            if (
                delete_resource
                and kept_if_superseded is not None
                and self._current_traversal(conn, stack_id) != traversal_id
            ):
                if not self._cas_resource(conn, resource_id, expected_key, kept_if_superseded):
                    conn.rollback()
                    return False, [], ""
            elif delete_resource:
                if not self._delete_resource(conn, resource_id, expected_key):
                    conn.rollback()
                    return False, [], ""
            elif changes is not None and not self._cas_resource(
                conn, resource_id, expected_key, changes
            ):
                conn.rollback()
                return False, [], ""
        self._add_events(conn, stack_id, events)
        ready = self._report(conn, stack_id, traversal_id, sender, reports, expected_counts)
        current = self._current_traversal(conn, stack_id)
        return True, ready, current or ""

    async def _pg_finish_node(
        self,
        stack_id: str,
        traversal_id: str,
        sender: GraphNode,
        resource_id: int | None,
        expected_key: int | None,
        changes: Mapping[str, Any] | None,
        delete_resource: bool,
        events: Sequence[NewEvent],
        reports: Mapping[GraphNode, Mapping[str, Any]],
        expected_counts: Mapping[GraphNode, int],
        kept_if_superseded: Mapping[str, Any] | None,
    ) -> tuple[bool, list[GraphNode], str]:
        """``finish_node`` on PostgreSQL: one statement (see ``postgres_hot``)."""
        assert self._pg is not None
        row = None
        if resource_id is not None and expected_key is not None:
            row = (resource_id, expected_key)
        key = expected_key or 0  # the values are written only with a row
        now = self._clock()
        stored, ready, current = await self._pg.finish_node(
            stack_id=stack_id,
            traversal_id=traversal_id,
            sender=(sender.resource_id, sender.is_update),
            resource=row,
            values=None if changes is None else self._cas_values(key, changes),
            delete=delete_resource,
            kept=(
                None if kept_if_superseded is None else self._cas_values(key, kept_if_superseded)
            ),
            events=event_rows(stack_id, events, now),
            targets=[
                (
                    target.resource_id,
                    target.is_update,
                    dict(reports[target]),
                    expected_counts.get(target, 0),
                )
                for target in sorted(reports)
            ],
            now=now,
        )
        return stored, [GraphNode(rid, upd) for rid, upd in ready], current

    # --- services --------------------------------------------------------------------

    async def register_service(self, record: ServiceRecord) -> None:
        await self._run(self._register_service, record)

    def _register_service(self, record: ServiceRecord) -> None:
        with self._tx() as conn:
            conn.execute(t.service.delete().where(t.service.c.engine_id == record.engine_id))
            conn.execute(
                t.service.insert().values(
                    engine_id=record.engine_id,
                    host=record.host,
                    pid=record.pid,
                    roles=list(record.roles),
                    started_at=record.started_at,
                    heartbeat_at=record.heartbeat_at,
                    process_start=record.process_start,
                )
            )

    async def list_services(self) -> list[ServiceRecord]:
        return await self._read(self._list_services)

    def _list_services(self) -> list[ServiceRecord]:
        with self._tx() as conn:
            rows = conn.execute(sa.select(t.service).order_by(t.service.c.started_at)).all()
        return [
            ServiceRecord(
                engine_id=row.engine_id,
                host=row.host,
                pid=row.pid,
                roles=tuple(row.roles),
                started_at=row.started_at,
                heartbeat_at=row.heartbeat_at,
                process_start=row.process_start,
            )
            for row in rows
        ]

    async def heartbeat(self, engine_id: str, now: float) -> None:
        await self._run(self._heartbeat, engine_id, now)

    def _heartbeat(self, engine_id: str, now: float) -> None:
        with self._tx() as conn:
            conn.execute(
                t.service.update()
                .where(t.service.c.engine_id == engine_id)
                .values(heartbeat_at=now)
            )

    async def remove_service(self, engine_id: str) -> None:
        await self._run(self._remove_service, engine_id)

    def _remove_service(self, engine_id: str) -> None:
        with self._tx() as conn:
            conn.execute(t.service.delete().where(t.service.c.engine_id == engine_id))

    async def live_engines(self, heartbeat_after: float) -> set[str]:
        return await self._read(self._live_engines, heartbeat_after)

    def _live_engines(self, heartbeat_after: float) -> set[str]:
        with self._tx() as conn:
            return set(
                conn.execute(
                    sa.select(t.service.c.engine_id).where(
                        t.service.c.heartbeat_at > heartbeat_after
                    )
                ).scalars()
            )

    # --- leases (converge.adapters.sql.leases) ----------------------------------------

    async def take_lease(
        self, name: str, holder: str, *, now: float, ttl: float | None, live_after: float
    ) -> bool:
        return await self._run(
            self._in_tx,
            lambda conn: leases.take(conn, name, holder, now=now, ttl=ttl, live_after=live_after),
        )

    async def release_lease(self, name: str, holder: str) -> None:
        await self._run(self._in_tx, lambda conn: leases.give_back(conn, name, holder))
