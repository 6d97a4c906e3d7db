"""The synchronizer's baseline in the SQL store: entities, per-type sequence numbers, CAS.

A pass reads the baseline without locks, compares it with the observation (pure:
``converge.core.baseline.compare``), then writes in one transaction that first locks the
type's sequence row: every change whose baseline entry is no longer the one it was computed
against — another sampler got there first — is dropped (compare-and-swap, so one change gives
one notification however many samplers saw it). The sequence lock also orders commits, so
the numbers a type hands out grow in commit order and a snapshot read under it holds exactly
the changes numbered up to the sequence it reports.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from converge.adapters.sql import tables as t
from converge.core.baseline import (
    BaselineEntry,
    ChangeKind,
    EntityChange,
    EntityState,
    ManagedEntity,
    Observation,
    Owner,
    Snapshot,
    compare,
)
from converge.messages import ChangeNotification

entity = sa.Table(
    "entity",
    t.metadata,
    sa.Column("type", sa.String(255), primary_key=True),
    sa.Column("physical_id", sa.String(255), primary_key=True),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Column("essence", sa.JSON, nullable=False),
    sa.Column("stack_id", sa.String(36), nullable=True),
    sa.Column("resource_id", sa.Integer, nullable=True),
    sa.Column("resource_name", sa.String(255), nullable=True),
    sa.Column("seq", sa.Integer, nullable=False),
    # When the observation that set the stored hash was taken: an older one never wins.
    sa.Column("observed_at", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
    sa.Index("ix_entity_stack", "stack_id"),
)

entity_seq = sa.Table(
    "entity_seq",
    t.metadata,
    sa.Column("type", sa.String(255), primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
)

# Bound parameters per IN list: well under SQLite's and PostgreSQL's limits.
_CHUNK = 5000

if TYPE_CHECKING:  # the store makes its entity store (store.py imports this module)
    from converge.adapters.sql.store import SqlStore

T = TypeVar("T")


class EntityStore:
    """Baseline reads and compare-and-swap writes over the ``SqlStore``'s engine and threads."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    # --- managed entities --------------------------------------------------------------

    async def managed(self, type_names: Collection[str] | None = None) -> list[ManagedEntity]:
        """Resource rows of live stacks that have a physical id and are not deleted."""
        names = None if type_names is None else tuple(type_names)
        return await self._store._run(self._managed, names)

    def _managed(self, type_names: tuple[str, ...] | None) -> list[ManagedEntity]:
        r, s = t.resource.c, t.stack.c
        query = (
            sa.select(
                r.id,
                r.name,
                r.type,
                r.physical_resource_id,
                r.properties_data,
                r.plugin_data,
                s.id.label("stack_id"),
                s.name.label("stack_name"),
            )
            .join(t.stack, s.id == r.stack_id)
            .where(
                s.deleted_marker == "",
                r.physical_resource_id.is_not(None),
                sa.not_(sa.and_(r.action == "DELETE", r.status == "COMPLETE")),
            )
            .order_by(r.id)
        )
        if type_names is not None:
            query = query.where(r.type.in_(type_names))
        with self._store._tx() as conn:
            rows = conn.execute(query).all()
        found: dict[tuple[str, str], ManagedEntity] = {}
        for row in rows:
            # Two rows claiming one entity (an adopted resource): the newest row owns it.
            found[(row.type, row.physical_resource_id)] = ManagedEntity(
                type=row.type,
                physical_id=row.physical_resource_id,
                owner=Owner(row.stack_id, row.id, row.name),
                stack_name=row.stack_name,
                properties=row.properties_data or {},
                plugin_data=row.plugin_data or {},
            )
        return list(found.values())

    # --- reconcile ---------------------------------------------------------------------

    async def reconcile(
        self,
        type_name: str,
        observed: Mapping[str, Observation],
        *,
        complete: bool,
        gone: Collection[str] = (),
        unknown: Collection[str] = (),
        observed_at: float,
        now: float,
    ) -> list[ChangeNotification]:
        """Bring the baseline of ``type_name`` up to an observation; the changes that won.

        ``complete``: the observation covers the whole type, so an entity of the baseline
        absent from it (and not in ``unknown``, where observing failed) is gone. ``gone``:
        entities known to be gone. ``observed_at``: when the observation began.
        """
        return await self._store._run(
            self._reconcile,
            type_name,
            observed,
            complete,
            frozenset(gone),
            frozenset(unknown),
            observed_at,
            now,
        )

    def _reconcile(
        self,
        type_name: str,
        observed: Mapping[str, Observation],
        complete: bool,
        gone: frozenset[str],
        unknown: frozenset[str],
        observed_at: float,
        now: float,
    ) -> list[ChangeNotification]:
        scope = None if complete else [*observed, *gone]
        with self._store._tx() as conn:
            baseline = self._entries(conn, type_name, scope, detailed=False)
        for physical_id in unknown - observed.keys():
            baseline.pop(physical_id, None)  # observing it failed: neither seen nor gone
        changes = compare(baseline, observed, complete=complete, gone=gone)
        with self._store._tx() as conn:
            winners: list[EntityChange] = []
            current: dict[str, BaselineEntry] = {}
            seq = 0
            if changes:
                seq = self._lock_sequence(conn, type_name)
                current = self._entries(
                    conn, type_name, [c.physical_id for c in changes], detailed=True
                )
                winners = [c for c in changes if _still_expected(c, current, observed_at)]
            notifications = self._write(conn, type_name, winners, current, seq, observed_at, now)
            seen = [pid for pid in observed if pid not in unknown]
            if complete and not unknown:
                conn.execute(
                    entity.update().where(entity.c.type == type_name).values(last_seen=now)
                )
            else:
                for chunk in _chunks(seen):
                    conn.execute(
                        entity.update()
                        .where(entity.c.type == type_name, entity.c.physical_id.in_(chunk))
                        .values(last_seen=now)
                    )
        return notifications

    def _lock_sequence(self, conn: Connection, type_name: str) -> int:
        """Lock the type's sequence row (made if missing) and read it: writers queue here."""
        conn.execute(self._store._insert_ignore(entity_seq).values(type=type_name, seq=0))
        return int(
            conn.execute(
                sa.select(entity_seq.c.seq).where(entity_seq.c.type == type_name).with_for_update()
            ).scalar_one()
        )

    def _entries(
        self,
        conn: Connection,
        type_name: str,
        physical_ids: Sequence[str] | None,
        *,
        detailed: bool,
    ) -> dict[str, BaselineEntry]:
        """Baseline entries; ``detailed`` adds what only a write needs (name, observed_at)."""
        c = entity.c
        columns = [c.physical_id, c.hash, c.stack_id, c.resource_id]
        if detailed:
            columns += [c.resource_name, c.observed_at]
        if physical_ids is None:
            queries: Iterable[Any] = [sa.select(*columns).where(c.type == type_name)]
        else:
            queries = (
                sa.select(*columns).where(c.type == type_name, c.physical_id.in_(chunk))
                for chunk in _chunks(physical_ids)
            )
        entries: dict[str, BaselineEntry] = {}
        for query in queries:
            # ``all()`` fetches in bulk: twice as fast as iterating row by row.
            entries.update((row[0], BaselineEntry(*row[1:])) for row in conn.execute(query).all())
        return entries

    def _write(
        self,
        conn: Connection,
        type_name: str,
        winners: list[EntityChange],
        current: Mapping[str, BaselineEntry],
        seq: int,
        observed_at: float,
        now: float,
    ) -> list[ChangeNotification]:
        if not winners:
            return []
        notifications: list[ChangeNotification] = []
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        deletes: list[str] = []
        for change in winners:
            seq += 1
            seen = change.observation
            owner = seen.owner if seen else None
            if change.kind == ChangeKind.GONE:
                deletes.append(change.physical_id)
                expected = current.get(change.physical_id)
                notifications.append(
                    ChangeNotification(
                        type=type_name,
                        physical_id=change.physical_id,
                        kind=ChangeKind.GONE,
                        seq=seq,
                        essence=None,
                        hash=None,
                        observed_at=observed_at,
                        stack_id=expected.stack_id if expected else None,
                        resource_id=expected.resource_id if expected else None,
                        resource_name=expected.resource_name if expected else None,
                    )
                )
                continue
            assert seen is not None  # appeared and changed carry their observation
            row = {
                "b_type": type_name,
                "b_physical_id": change.physical_id,
                "hash": seen.hash,
                "essence": dict(seen.essence),
                "stack_id": owner.stack_id if owner else None,
                "resource_id": owner.resource_id if owner else None,
                "resource_name": owner.resource_name if owner else None,
                "seq": seq,
                "observed_at": observed_at,
                "last_seen": now,
            }
            (inserts if change.kind == ChangeKind.APPEARED else updates).append(row)
            notifications.append(
                ChangeNotification(
                    type=type_name,
                    physical_id=change.physical_id,
                    kind=change.kind,
                    seq=seq,
                    essence=seen.essence,
                    hash=seen.hash,
                    observed_at=observed_at,
                    stack_id=owner.stack_id if owner else None,
                    resource_id=owner.resource_id if owner else None,
                    resource_name=owner.resource_name if owner else None,
                )
            )
        if inserts:
            conn.execute(
                entity.insert(),
                [
                    {**_without_keys(row), "type": type_name, "physical_id": row["b_physical_id"]}
                    for row in inserts
                ],
            )
        if updates:
            conn.execute(
                entity.update()
                .where(
                    entity.c.type == sa.bindparam("b_type"),
                    entity.c.physical_id == sa.bindparam("b_physical_id"),
                )
                .values({key: sa.bindparam(key) for key in _without_keys(updates[0])}),
                updates,
            )
        for chunk in _chunks(deletes):
            conn.execute(
                entity.delete().where(entity.c.type == type_name, entity.c.physical_id.in_(chunk))
            )
        conn.execute(entity_seq.update().where(entity_seq.c.type == type_name).values(seq=seq))
        return notifications

    # --- reads -------------------------------------------------------------------------

    async def snapshot(self, type_name: str | None = None) -> Snapshot:
        """Every entity of a type (or all), with the sequence numbers it is consistent with."""
        return await self._store._run(self._snapshot, type_name)

    def _snapshot(self, type_name: str | None) -> Snapshot:
        with self._store._tx() as conn:
            query = sa.select(entity_seq.c.type, entity_seq.c.seq)
            if type_name is not None:
                conn.execute(self._store._insert_ignore(entity_seq).values(type=type_name, seq=0))
                query = query.where(entity_seq.c.type == type_name)
            # A shared lock on the sequence rows holds writers of these types off until the
            # entities are read: what is read is exactly the changes numbered up to ``seqs``.
            seqs = {row[0]: int(row[1]) for row in conn.execute(query.with_for_update(read=True))}
            if not seqs:
                return Snapshot([], {})
            rows = conn.execute(
                sa.select(entity)
                .where(entity.c.type.in_(list(seqs)))
                .order_by(entity.c.type, entity.c.physical_id)
            ).all()
        entities = [
            EntityState(
                type=row.type,
                physical_id=row.physical_id,
                hash=row.hash,
                essence=row.essence,
                seq=row.seq,
                last_seen=row.last_seen,
                stack_id=row.stack_id,
                resource_id=row.resource_id,
                resource_name=row.resource_name,
            )
            for row in rows
        ]
        return Snapshot(entities, seqs)

    async def sequence(self, type_name: str) -> int:
        """The type's current sequence number (0 before its first change)."""
        return await self._store._run(self._sequence, type_name)

    def _sequence(self, type_name: str) -> int:
        with self._store._tx() as conn:
            value = conn.execute(
                sa.select(entity_seq.c.seq).where(entity_seq.c.type == type_name)
            ).scalar_one_or_none()
        return int(value or 0)


def _still_expected(
    change: EntityChange, current: Mapping[str, BaselineEntry], observed_at: float
) -> bool:
    """Compare-and-swap: the entry is what the change was computed against, and no newer
    observation than this one set it."""
    entry, expected = current.get(change.physical_id), change.expected
    if entry is None or expected is None:
        return entry is None and expected is None
    return entry[:3] == expected[:3] and entry.observed_at <= observed_at


def _without_keys(row: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in row.items() if not key.startswith("b_")}


def _chunks(items: Sequence[T] | Collection[T]) -> Iterator[list[T]]:
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) == _CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
