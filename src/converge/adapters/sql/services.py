"""Services in the SQL store: the engine processes that registered, their heartbeats,
and the leases they take (one statement each: ``leases.py``).
"""

from __future__ import annotations

import sqlalchemy as sa

from converge.adapters.sql import leases
from converge.adapters.sql import tables as t
from converge.adapters.sql.connection import StoreBase
from converge.records import ServiceRecord


class ServicesMixin(StoreBase):
    """Service rows: the engine processes running, their roles and heartbeats."""

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
        # The process is gone (stopped, or found dead): the rows it claimed are let go in
        # the same commit, so nothing looks held by it afterwards. The claims' atomic keys
        # stay as they are: a live process that read such a row can still claim it.
        with self._tx() as conn:
            conn.execute(t.service.delete().where(t.service.c.engine_id == engine_id))
            conn.execute(
                t.resource.update()
                .where(t.resource.c.engine_id == engine_id)
                .values(engine_id=None)
            )

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


class LeasesMixin(StoreBase):
    """Leases (``converge.adapters.sql.leases``): one holder at a time, renewed or taken over."""

    async def take_lease(
        self, name: str, holder: str, *, now: float, ttl: float | None, live_after: float
    ) -> bool:
        return await self._run(
            self._in_tx,
            lambda conn: leases.take(conn, name, holder, now=now, ttl=ttl, live_after=live_after),
        )

    async def release_lease(self, name: str, holder: str) -> None:
        await self._run(self._in_tx, lambda conn: leases.give_back(conn, name, holder))
