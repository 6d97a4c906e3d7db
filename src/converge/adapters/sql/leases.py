"""Leases in the SQL store: one statement takes or renews a lease, on SQLite and PostgreSQL.

Taking a lease is an upsert whose update applies only when the lease is free for the
taker: held by the taker already, expired, or held by a process that is not alive (no
service row with a fresh heartbeat). The row lock of the upsert makes it a
compare-and-swap: of many takers racing, exactly one gets a row back.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from converge.adapters.sql import tables as t


def take(
    conn: Connection,
    name: str,
    holder: str,
    *,
    now: float,
    ttl: float | None,
    live_after: float,
) -> bool:
    """Take or renew lease ``name`` for ``holder``; False when someone else holds it."""
    insert: Any = (
        postgresql.insert(t.lease) if conn.dialect.name == "postgresql" else sqlite.insert(t.lease)
    )
    expires_at = None if ttl is None else now + ttl
    live = sa.select(t.service.c.engine_id).where(t.service.c.heartbeat_at > live_after)
    statement = (
        insert.values(name=name, holder=holder, expires_at=expires_at)
        .on_conflict_do_update(
            index_elements=[t.lease.c.name],
            set_={"holder": holder, "expires_at": expires_at},
            where=sa.or_(
                t.lease.c.holder == holder,
                t.lease.c.expires_at <= now,
                t.lease.c.holder.not_in(live),
            ),
        )
        .returning(t.lease.c.holder)
    )
    return conn.execute(statement).first() is not None


def give_back(conn: Connection, name: str, holder: str) -> None:
    """Release the lease if ``holder`` still holds it (a lease taken over stays taken)."""
    conn.execute(t.lease.delete().where(t.lease.c.name == name, t.lease.c.holder == holder))
