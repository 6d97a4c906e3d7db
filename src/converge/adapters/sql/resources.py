"""Resources in the SQL store: rows read on the check path and written by compare-and-swap.

Workers race on resource rows: every write but drift's takes the row's ``atomic_key``
(``_cas_resource``), so of two writers from the same key exactly one wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from converge.adapters.sql import tables as t
from converge.adapters.sql.connection import Conn
from converge.adapters.sql.events import EventsMixin
from converge.adapters.sql.records import (
    column_value,
    event_rows,
    inserted_id,
    merged,
    new_resource_row,
    resource_record,
)
from converge.records import NewEvent, NewResource, ResourceRecord

# The statements every resource check runs, built once: SQLAlchemy then reuses their
# compiled form without rebuilding and hashing the expression on each call (which cost
# more than the SQL itself).
_res = t.resource.c
_SELECT_RESOURCE = sa.select(t.resource).where(_res.id == sa.bindparam("resource_id"))
# Compare-and-swap: the SET columns come from the parameters of each call.
_CAS_RESOURCE = t.resource.update().where(
    _res.id == sa.bindparam("_resource_id"), _res.atomic_key == sa.bindparam("_expected_key")
)
_DELETE_RESOURCE = t.resource.delete().where(
    _res.id == sa.bindparam("_resource_id"), _res.atomic_key == sa.bindparam("_expected_key")
)


class ResourcesMixin(EventsMixin):
    """Resource rows: listed, read, and written by compare-and-swap on ``atomic_key``."""

    async def list_resources(self, stack_id: str) -> list[ResourceRecord]:
        return await self._read(self._list_resources, stack_id)

    def _list_resources(self, stack_id: str) -> list[ResourceRecord]:
        with self._tx() as conn:
            rows = self._resource_rows_of(conn, stack_id)
        # Records are made after the commit: on SQLite the transaction holds the write
        # lock, and making a big stack's records takes longer than reading its rows.
        return [resource_record(row) for row in rows]

    def _resources_of(self, conn: Connection, stack_id: str) -> list[ResourceRecord]:
        return [resource_record(row) for row in self._resource_rows_of(conn, stack_id)]

    def _resource_rows_of(self, conn: Connection, stack_id: str) -> Sequence[Any]:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.resources_of_stack(raw, stack_id)
        return conn.execute(
            sa.select(t.resource).where(t.resource.c.stack_id == stack_id).order_by(t.resource.c.id)
        ).all()

    async def resource_types(self, stack_id: str) -> set[str]:
        """The types of the stack's resource rows."""
        return await self._read(self._resource_types, stack_id)

    def _resource_types(self, stack_id: str) -> set[str]:
        with self._tx() as conn:
            query = sa.select(t.resource.c.type).where(t.resource.c.stack_id == stack_id)
            return set(conn.execute(query.distinct()).scalars())

    async def resource_hosts(self, stack_id: str) -> list[tuple[str, str | None]]:
        """(name, host) of each of the stack's resource rows: two columns, where a full
        listing of a 20,000-resource stack decodes every row's properties and data."""
        return await self._read(self._resource_hosts, stack_id)

    def _resource_hosts(self, stack_id: str) -> list[tuple[str, str | None]]:
        with self._tx() as conn:
            query = sa.select(t.resource.c.name, t.resource.c.host).where(
                t.resource.c.stack_id == stack_id
            )
            return [(name, host) for name, host in conn.execute(query.order_by(t.resource.c.id))]

    async def get_resource(self, resource_id: int) -> ResourceRecord | None:
        if self._pg is not None:
            row = await self._pg.resource(resource_id)
            return None if row is None else resource_record(row)
        return await self._short(self._resource_by_id, resource_id)

    def _resource_by_id(self, conn: Conn, resource_id: int) -> ResourceRecord | None:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            row = self._hot.resource(raw, resource_id)
        else:
            assert isinstance(conn, Connection)
            row = conn.execute(_SELECT_RESOURCE, {"resource_id": resource_id}).one_or_none()
        return None if row is None else resource_record(row)

    async def update_resource(
        self,
        resource_id: int,
        expected_key: int,
        changes: Mapping[str, Any],
        *,
        events: Sequence[NewEvent] = (),
        stack_id: str | None = None,
        current: ResourceRecord | None = None,
    ) -> ResourceRecord | None:
        """Compare-and-swap a resource row; None when someone else changed it first.

        Returns the row as written: read back, or, given ``current`` (the row as read
        at ``expected_key``), ``current`` with the changes applied, saving the read.
        """
        if self._pg is not None:
            return await self._pg_update_resource(
                resource_id, expected_key, changes, events, stack_id, current
            )
        return await self._short(
            self._update_resource, resource_id, expected_key, changes, events, stack_id, current
        )

    def _update_resource(
        self,
        conn: Conn,
        resource_id: int,
        expected_key: int,
        changes: Mapping[str, Any],
        events: Sequence[NewEvent],
        stack_id: str | None,
        current: ResourceRecord | None,
    ) -> ResourceRecord | None:
        changes = dict(changes)
        changes.setdefault("updated_at", self._clock())
        if not self._cas_resource(conn, resource_id, expected_key, changes):
            return None
        if events and stack_id:
            self._add_events(conn, stack_id, events)
        if current is not None and current.atomic_key == expected_key:
            return merged(current, changes, expected_key + 1)
        return self._resource_by_id(conn, resource_id)

    async def _pg_update_resource(
        self,
        resource_id: int,
        expected_key: int,
        changes: Mapping[str, Any],
        events: Sequence[NewEvent],
        stack_id: str | None,
        current: ResourceRecord | None,
    ) -> ResourceRecord | None:
        """``update_resource`` on PostgreSQL: one statement (see ``postgres_hot``)."""
        assert self._pg is not None
        changes = dict(changes)
        changes.setdefault("updated_at", self._clock())
        merge = current is not None and current.atomic_key == expected_key
        now = self._clock()
        won, row = await self._pg.update_resource(
            resource_id,
            expected_key,
            self._cas_values(expected_key, changes),
            stack_id,
            event_rows(stack_id or "", events, now),
            now,
            read_back=not merge,
        )
        if not won:
            return None
        if merge:
            assert current is not None
            return merged(current, changes, expected_key + 1)
        return resource_record(row)

    def _cas_values(self, expected_key: int, changes: Mapping[str, Any]) -> dict[str, Any]:
        """The columns a resource compare-and-swap writes (the key taken, the time)."""
        values = {key: column_value(value) for key, value in changes.items()}
        values["atomic_key"] = expected_key + 1
        values.setdefault("updated_at", self._clock())
        return values

    def _cas_resource(
        self, conn: Conn, resource_id: int, expected_key: int, changes: Mapping[str, Any]
    ) -> bool:
        values = self._cas_values(expected_key, changes)
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.cas_resource(raw, resource_id, expected_key, values)
        assert isinstance(conn, Connection)
        values["_resource_id"] = resource_id
        values["_expected_key"] = expected_key
        return conn.execute(_CAS_RESOURCE, values).rowcount == 1

    async def set_drift(
        self,
        resource_id: int,
        changes: Mapping[str, Any],
        *,
        events: Sequence[NewEvent] = (),
        stack_id: str | None = None,
        observed_at: float | None = None,
    ) -> bool:
        """Write drift and heal columns only, without taking the row's ``atomic_key``.

        Drift is recorded while workers may hold the row: bumping the key would make their
        compare-and-swap fail. Only the drift_* and heal_* columns may be given.
        ``observed_at``: when the observation behind the change began; it becomes
        ``drift_checked_at`` and nothing is written (False) if a newer one is recorded.
        """
        allowed = {
            "drift_status",
            "drift_detail",
            "drift_checked_at",
            "heal_attempts",
            "heal_last_at",
            "heal_next_at",
        }
        if not set(changes) <= allowed:
            raise ValueError(f"set_drift cannot write {sorted(set(changes) - allowed)}")
        return await self._run(self._set_drift, resource_id, changes, events, stack_id, observed_at)

    def _set_drift(
        self,
        resource_id: int,
        changes: Mapping[str, Any],
        events: Sequence[NewEvent],
        stack_id: str | None,
        observed_at: float | None,
    ) -> bool:
        with self._tx() as conn:
            values = {key: column_value(value) for key, value in changes.items()}
            where = [t.resource.c.id == resource_id]
            if observed_at is not None:
                values["drift_checked_at"] = observed_at
                checked = t.resource.c.drift_checked_at
                where.append(sa.or_(checked.is_(None), checked <= observed_at))
            done = conn.execute(t.resource.update().where(*where).values(**values)).rowcount
            if done and events and stack_id:
                self._add_events(conn, stack_id, events)
            return bool(done)

    async def add_replacement(
        self, old: ResourceRecord, new: NewResource, old_changes: Mapping[str, Any]
    ) -> tuple[ResourceRecord, ResourceRecord] | None:
        """Make the row of a replacement and mark the old row replaced, atomically."""
        return await self._short(self._add_replacement, old, new, old_changes)

    def _add_replacement(
        self, conn: Conn, old: ResourceRecord, new: NewResource, old_changes: Mapping[str, Any]
    ) -> tuple[ResourceRecord, ResourceRecord] | None:
        values = new_resource_row(old.stack_id, new, self._clock())
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            new_id = self._hot.insert_resource(raw, values)
        else:
            assert isinstance(conn, Connection)
            new_id = inserted_id(conn.execute(t.resource.insert().values(**values)))
        changes = dict(old_changes)
        changes["replaced_by"] = new_id
        if not self._cas_resource(conn, old.id, old.atomic_key, changes):
            conn.rollback()
            return None
        updated_old = self._resource_by_id(conn, old.id)
        created = self._resource_by_id(conn, new_id)
        assert updated_old is not None and created is not None  # same transaction
        return updated_old, created

    def _delete_resource(self, conn: Conn, resource_id: int, expected_key: int) -> bool:
        raw = self._raw(conn)
        if raw is not None and self._hot is not None:
            return self._hot.delete_resource(raw, resource_id, expected_key)
        assert isinstance(conn, Connection)
        deleted = conn.execute(
            _DELETE_RESOURCE, {"_resource_id": resource_id, "_expected_key": expected_key}
        ).rowcount
        return bool(deleted == 1)

    async def delete_resources(self, resource_ids: Iterable[int]) -> None:
        await self._run(self._delete_resources, tuple(resource_ids))

    def _delete_resources(self, resource_ids: tuple[int, ...]) -> None:
        if resource_ids:
            with self._tx() as conn:
                conn.execute(t.resource.delete().where(t.resource.c.id.in_(resource_ids)))
