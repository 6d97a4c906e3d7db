"""A stack's resources as a listing shows them (Heat's resource list without details).

Only the columns a listing shows are read: a full record decodes every row's properties,
attributes and plugin data, and making the records of a thousand resources was most of
the time spent answering ``GET /stacks/{name}/{id}/resources``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from converge.adapters import json_codec
from converge.adapters.sql import tables as t
from converge.adapters.sql.store import SqlStore
from converge.records import ResourceSummary

_C = t.resource.c
_COLUMNS = (
    _C.id,
    _C.name,
    _C.type,
    _C.action,
    _C.status,
    _C.status_reason,
    _C.physical_resource_id,
    # As text: SQLAlchemy's JSON type would run the decoder on every row's "[]".
    sa.type_coerce(_C.requires, sa.Text).label("requires"),
    _C.created_at,
    _C.updated_at,
    _C.drift_status,
)


class ResourceListing:
    """Reads the summaries over the ``SqlStore``'s engine and threads."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    async def of_stack(self, stack_id: str) -> list[ResourceSummary]:
        """Every resource row of the stack (replaced ones included), oldest first."""
        return await self._store._read(self._of_stack, stack_id)

    def _of_stack(self, stack_id: str) -> list[ResourceSummary]:
        query = sa.select(*_COLUMNS).where(_C.stack_id == stack_id).order_by(_C.id)
        with self._store._tx() as conn:
            rows = conn.execute(query).all()
        return [_summary(row) for row in rows]


def _summary(row: Any) -> ResourceSummary:
    # Unpacked by position: attribute access on SQLAlchemy's rows costs more per field.
    (id_, name, type_, action, status, reason, physical, requires, created, updated, drift) = row
    return ResourceSummary(
        id_,
        name,
        type_,
        action,
        status,
        reason or "",
        physical,
        _ids(requires),
        created,
        updated,
        drift,
    )


def _ids(value: str | list[int] | None) -> frozenset[int]:
    """The row ids of ``requires``: JSON text from SQLite, already a list from psycopg."""
    if value is None or value == "[]":
        return frozenset()
    return frozenset(json_codec.loads(value) if isinstance(value, str) else value)
