"""Stacks in the SQL store: the stack row, its traversal graph, and its lifetime."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from converge.adapters.sql import tables as t
from converge.adapters.sql.bulk import insert_rows
from converge.adapters.sql.connection import Conn
from converge.adapters.sql.records import (
    column_value,
    new_resource_row,
    stack_found,
    stack_record,
    written_resource_record,
)
from converge.adapters.sql.resources import ResourcesMixin
from converge.adapters.sql.templates import TemplatesMixin
from converge.core.states import Action, Status
from converge.core.template.gcpause import paused_gc
from converge.errors import Conflict, NotFound
from converge.records import NewEvent, NewResource, NewTemplate, ResourceRecord, StackRecord

# Columns read on the hot path: never the traversal graph, which can be megabytes.
_STACK_COLUMNS = [c for c in t.stack.c if c.name != "current_deps"]

# The statements every resource check runs, built once: SQLAlchemy then reuses their
# compiled form without rebuilding and hashing the expression on each call (which cost
# more than the SQL itself).
_SELECT_STACK = sa.select(*_STACK_COLUMNS).where(t.stack.c.id == sa.bindparam("stack_id"))
# A stack by name or id in a project, the newest first (a name may have deleted namesakes).
_FIND_STACK = (
    sa.select(*_STACK_COLUMNS)
    .where(
        t.stack.c.project_id == sa.bindparam("project_id"),
        sa.or_(
            t.stack.c.name == sa.bindparam("name_or_id"),
            t.stack.c.id == sa.bindparam("name_or_id"),
        ),
    )
    .order_by(t.stack.c.created_at.desc())
    .limit(1)
)
_FIND_LIVE_STACK = _FIND_STACK.where(t.stack.c.deleted_marker == "")
# Ids for new resource rows, taken before they are inserted (see ``_insert_resources``).
_NEXT_RESOURCE_IDS = sa.text(
    "SELECT nextval(pg_get_serial_sequence('resource', 'id')) FROM generate_series(1, :count)"
)
# How long a template nothing uses is kept: an operation stores its template, then starts
# (seconds later; a create left unstarted is started by the sweeper within a minute).
# Past this, an unused template is the input of an operation that never started (refused,
# or its process died) and is dropped; one that starts later still is refused by its start.
UNUSED_TEMPLATE_KEPT = 3600.0
# Read by a finish, as its last word on whether the traversal it worked for is still the
# stack's: locked (FOR KEY SHARE on PostgreSQL) so that it waits for a traversal being
# started (which locks the stack FOR UPDATE) and sees it. See ``postgres_hot._CURRENT``.
_SELECT_CURRENT_TRAVERSAL = (
    sa.select(t.stack.c.current_traversal)
    .where(t.stack.c.id == sa.bindparam("stack_id"))
    .with_for_update(read=True, key_share=True)
)


class StacksMixin(TemplatesMixin, ResourcesMixin):
    """Stack rows: created with their template, found by name, written by compare-and-swap,
    pointed at a new traversal with its resource rows, purged and marked deleted."""

    async def create_stack(
        self,
        name: str,
        project_id: str,
        *,
        action: Action,
        disable_rollback: bool,
        timeout_mins: float | None,
        drift_policy: str,
        tags: Sequence[str] = (),
        stack_id: str | None = None,
        owner_id: str | None = None,
        template: NewTemplate | None = None,
    ) -> StackRecord:
        """Insert a stack row, and with ``template`` its template, in one transaction.

        A stack is then never seen without its template, whatever fails or runs
        concurrently; a second stack of the same live name is a ``Conflict``.
        """
        return await self._run(
            self._create_stack,
            name,
            project_id,
            action,
            disable_rollback,
            timeout_mins,
            drift_policy,
            tuple(tags),
            stack_id or str(uuid.uuid4()),
            owner_id,
            template,
        )

    def _create_stack(
        self,
        name: str,
        project_id: str,
        action: Action,
        disable_rollback: bool,
        timeout_mins: float | None,
        drift_policy: str,
        tags: tuple[str, ...],
        stack_id: str,
        owner_id: str | None,
        template: NewTemplate | None,
    ) -> StackRecord:
        try:
            with self._tx() as conn:
                conn.execute(
                    t.stack.insert().values(
                        id=stack_id,
                        name=name,
                        project_id=project_id,
                        deleted_marker="",
                        action=str(action),
                        status=str(Status.IN_PROGRESS),
                        status_reason="Stack creation started",
                        current_traversal="",
                        disable_rollback=disable_rollback,
                        timeout_mins=timeout_mins,
                        drift_policy=drift_policy,
                        tags=list(tags),
                        outputs={},
                        atomic_key=0,
                        created_at=self._clock(),
                        owner_id=owner_id,
                    )
                )
                if template is not None:
                    template_id = self._insert_template(conn, stack_id, template)
                    conn.execute(
                        t.stack.update()
                        .where(t.stack.c.id == stack_id)
                        .values(raw_template_id=template_id)
                    )
                return self._stack_by_id(conn, stack_id)
        except IntegrityError as exc:
            raise Conflict(
                f"a stack named {name!r} already exists in {self.location}: another command "
                "may have just created it; `converge apply` again updates it"
            ) from exc

    async def get_stack(self, stack_id: str) -> StackRecord:
        if self._pg is not None:
            return stack_found(await self._pg.stack(stack_id), stack_id)
        return await self._short(self._stack_by_id, stack_id)

    def _stack_by_id(self, conn: Conn, stack_id: str) -> StackRecord:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            row = self._hot.stack(raw, stack_id)
        else:
            assert isinstance(conn, Connection)
            row = conn.execute(_SELECT_STACK, {"stack_id": stack_id}).one_or_none()
        return stack_found(row, stack_id)

    async def find_stack(
        self, name_or_id: str, project_id: str, *, include_deleted: bool = False
    ) -> StackRecord:
        # Every API request that names a stack starts here: a short transaction, run
        # inline on SQLite (see ``_short``) with a statement built once.
        if self._pg is not None:
            row = await self._pg.find_stack(name_or_id, project_id, include_deleted)
            return stack_found(row, repr(name_or_id))
        return await self._short(self._find_stack, name_or_id, project_id, include_deleted)

    def _find_stack(
        self, conn: Conn, name_or_id: str, project_id: str, include_deleted: bool
    ) -> StackRecord:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            row = self._hot.find_stack(raw, name_or_id, project_id, include_deleted)
        else:
            assert isinstance(conn, Connection)
            query = _FIND_STACK if include_deleted else _FIND_LIVE_STACK
            row = conn.execute(query, {"project_id": project_id, "name_or_id": name_or_id}).first()
        return stack_found(row, repr(name_or_id))

    async def list_stacks(
        self, project_id: str | None = None, *, include_deleted: bool = False
    ) -> list[StackRecord]:
        return await self._read(self._list_stacks, project_id, include_deleted)

    def _list_stacks(self, project_id: str | None, include_deleted: bool) -> list[StackRecord]:
        query = sa.select(*_STACK_COLUMNS)
        if project_id is not None:
            query = query.where(t.stack.c.project_id == project_id)
        if not include_deleted:
            query = query.where(t.stack.c.deleted_marker == "")
        with self._tx() as conn:
            rows = conn.execute(query.order_by(t.stack.c.created_at)).all()
        return [stack_record(row) for row in rows]

    async def get_traversal_graph(self, stack_id: str) -> tuple[str, Mapping[str, Any] | None]:
        """The current traversal id and its stored graph."""
        return await self._read(self._get_traversal_graph, stack_id)

    def _get_traversal_graph(self, stack_id: str) -> tuple[str, Mapping[str, Any] | None]:
        with self._tx() as conn:
            row = conn.execute(
                sa.select(t.stack.c.current_traversal, t.stack.c.current_deps).where(
                    t.stack.c.id == stack_id
                )
            ).one_or_none()
        if row is None:
            raise NotFound(f"stack {stack_id} not found")
        return row.current_traversal, row.current_deps

    async def update_stack(
        self,
        stack_id: str,
        changes: Mapping[str, Any],
        *,
        expected_key: int | None = None,
        expected_traversal: str | None = None,
        events: Sequence[NewEvent] = (),
    ) -> StackRecord | None:
        """Compare-and-swap a stack row; None when the expectation no longer holds."""
        return await self._run(
            self._update_stack, stack_id, changes, expected_key, expected_traversal, events
        )

    def _update_stack(
        self,
        stack_id: str,
        changes: Mapping[str, Any],
        expected_key: int | None,
        expected_traversal: str | None,
        events: Sequence[NewEvent],
    ) -> StackRecord | None:
        with self._tx() as conn:
            if not self._cas_stack(conn, stack_id, changes, expected_key, expected_traversal):
                return None
            self._add_events(conn, stack_id, events)
            return self._stack_by_id(conn, stack_id)

    def _cas_stack(
        self,
        conn: Connection,
        stack_id: str,
        changes: Mapping[str, Any],
        expected_key: int | None,
        expected_traversal: str | None,
    ) -> bool:
        query = t.stack.update().where(t.stack.c.id == stack_id)
        if expected_key is not None:
            query = query.where(t.stack.c.atomic_key == expected_key)
        if expected_traversal is not None:
            query = query.where(t.stack.c.current_traversal == expected_traversal)
        values = {key: column_value(value) for key, value in changes.items()}
        values["atomic_key"] = t.stack.c.atomic_key + 1
        values.setdefault("updated_at", self._clock())
        return conn.execute(query.values(**values)).rowcount == 1

    def _current_traversal(self, conn: Conn, stack_id: str) -> str | None:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.current_traversal(raw, stack_id)
        assert isinstance(conn, Connection)
        found = conn.execute(_SELECT_CURRENT_TRAVERSAL, {"stack_id": stack_id})
        current: str | None = found.scalar_one_or_none()
        return current

    async def start_traversal(
        self,
        stack_id: str,
        expected_key: int,
        new_resources: Sequence[NewResource],
        build: Callable[[list[ResourceRecord]], tuple[Mapping[str, Any], Mapping[str, Any]]],
        events: Sequence[NewEvent] = (),
    ) -> StackRecord | None:
        """Atomically add resource rows and point the stack at a new traversal.

        ``build`` gets every resource row (the new ones included) and returns the stack
        changes and its graph. Nothing is written when the stack changed since
        ``expected_key`` was read (None is returned; the caller reads again and retries).
        """
        return await self._run(
            self._start_traversal, stack_id, expected_key, new_resources, build, events
        )

    def _start_traversal(
        self,
        stack_id: str,
        expected_key: int,
        new_resources: Sequence[NewResource],
        build: Callable[[list[ResourceRecord]], tuple[Mapping[str, Any], Mapping[str, Any]]],
        events: Sequence[NewEvent],
    ) -> StackRecord | None:
        with self._tx() as conn:
            # Locked until the new traversal is committed: a finish of an older one waits
            # and sees it (``_SELECT_CURRENT_TRAVERSAL``).
            current = conn.execute(
                sa.select(t.stack.c.atomic_key).where(t.stack.c.id == stack_id).with_for_update()
            ).scalar_one_or_none()
            if current != expected_key:
                return None
            # A big stack's rows, records and graph are thousands of objects that all live
            # on: a collection in the middle walks them for nothing, and the one they set
            # off was a full one (70-80 ms of a 1,000-resource start's 140, on PostgreSQL).
            with paused_gc():
                rows = self._insert_resources(conn, stack_id, new_resources)
                changes, graph = build(rows)
            template_id = changes.get("raw_template_id")
            if template_id is not None and not _has_template(conn, stack_id, template_id):
                # Purged as unused (``UNUSED_TEMPLATE_KEPT``): it was stored long ago.
                raise Conflict(
                    f"stack {stack_id}: the operation's template (stored more than "
                    f"{UNUSED_TEMPLATE_KEPT / 60:.0f} minutes ago) was removed as unused "
                    "before the operation started; run the operation again"
                )
            values = dict(changes)
            values["current_deps"] = graph
            if not self._cas_stack(conn, stack_id, values, expected_key, None):
                conn.rollback()
                return None
            self._add_events(conn, stack_id, events)
            return self._stack_by_id(conn, stack_id)

    def _insert_resources(
        self, conn: Connection, stack_id: str, new_resources: Sequence[NewResource]
    ) -> list[ResourceRecord]:
        """Insert the new rows; every row of the stack, the new ones included, by id.

        On PostgreSQL the new rows take their ids from the sequence first, so their records
        are made from what was written, not read back: reading 1,000 rows back cost more
        than writing them with COPY. (SQLite reads them back: its reads are cheap.)"""
        if not new_resources:
            return self._resources_of(conn, stack_id)
        now = self._clock()
        new_rows = [new_resource_row(stack_id, new, now) for new in new_resources]
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            self._hot.insert_resources(raw, new_rows)
            return self._resources_of(conn, stack_id)
        if conn.dialect.name != "postgresql":
            insert_rows(conn, t.resource, new_rows)
            return self._resources_of(conn, stack_id)
        existing = self._resources_of(conn, stack_id)
        ids = conn.execute(_NEXT_RESOURCE_IDS, {"count": len(new_rows)}).scalars().all()
        for row, resource_id in zip(new_rows, ids, strict=True):
            row["id"] = resource_id
        insert_rows(conn, t.resource, new_rows)
        # Two runs each in id order: the sort merges them.
        return sorted(existing + [written_resource_record(row) for row in new_rows], key=_id)

    async def purge_stack_data(self, stack_id: str, keep_template_ids: Iterable[int]) -> None:
        """Drop sync reports and templates the stack no longer needs."""
        await self._run(self._purge_stack_data, stack_id, tuple(keep_template_ids))

    def _purge_stack_data(self, stack_id: str, keep: tuple[int, ...]) -> None:
        with self._tx() as conn:
            # Only reports of settled traversals: a traversal started since must keep its own.
            # The row is locked (FOR SHARE: PostgreSQL; SQLite's writes are serial) until
            # the purge commits: an operation starting meanwhile (which locks it FOR UPDATE)
            # waits, then finds its template gone or in use, never used and then dropped.
            current = conn.execute(
                sa.select(
                    t.stack.c.current_traversal,
                    t.stack.c.status,
                    t.stack.c.raw_template_id,
                    t.stack.c.prev_raw_template_id,
                )
                .where(t.stack.c.id == stack_id)
                .with_for_update(read=True)
            ).one_or_none()
            for table in (t.sync_report, t.sync_point, t.sync_part):
                purge = table.delete().where(table.c.stack_id == stack_id)
                if current is not None and current.status == str(Status.IN_PROGRESS):
                    purge = purge.where(table.c.traversal_id != current.current_traversal)
                conn.execute(purge)
            in_use = set(keep) | {
                value
                for value in conn.execute(
                    sa.select(t.resource.c.current_template_id).where(
                        t.resource.c.stack_id == stack_id
                    )
                ).scalars()
                if value is not None
            }
            if current is not None:
                # An operation may have started since the caller read the stack.
                in_use |= {
                    value
                    for value in (current.raw_template_id, current.prev_raw_template_id)
                    if value is not None
                }
            if not in_use:
                return
            conn.execute(
                t.raw_template.delete().where(
                    t.raw_template.c.stack_id == stack_id,
                    t.raw_template.c.id.not_in(in_use),
                    sa.or_(
                        t.raw_template.c.id < min(in_use),
                        # A newer one may belong to an operation stored but not started
                        # yet: kept a while. A row no later traversal converged keeps an
                        # old template in use, so the first rule alone kept every later one.
                        t.raw_template.c.created_at < self._clock() - UNUSED_TEMPLATE_KEPT,
                    ),
                )
            )

    async def mark_stack_deleted(self, stack_id: str) -> None:
        await self._run(self._mark_stack_deleted, stack_id)

    def _mark_stack_deleted(self, stack_id: str) -> None:
        with self._tx() as conn:
            conn.execute(
                t.stack.update()
                .where(t.stack.c.id == stack_id)
                .values(deleted_marker=stack_id, current_deps=None)
            )
            conn.execute(t.sync_report.delete().where(t.sync_report.c.stack_id == stack_id))
            conn.execute(t.sync_point.delete().where(t.sync_point.c.stack_id == stack_id))
            conn.execute(t.sync_part.delete().where(t.sync_part.c.stack_id == stack_id))
            conn.execute(t.raw_template.delete().where(t.raw_template.c.stack_id == stack_id))


def _has_template(conn: Connection, stack_id: str, template_id: int) -> bool:
    found = conn.execute(
        sa.select(t.raw_template.c.id).where(
            t.raw_template.c.id == template_id, t.raw_template.c.stack_id == stack_id
        )
    ).first()
    return found is not None


def _id(record: ResourceRecord) -> int:
    return record.id
