"""Rows of PostgreSQL's hot statements: a table's columns read as one ``row_to_json``
value and given back with the attributes of SQLAlchemy's rows (``records.py`` reads both)."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from converge.adapters.sql import tables as t


class Rows:
    """A table's columns read as one ``row_to_json`` value, given back as a named tuple."""

    def __init__(self, table: sa.Table, *, skip: Sequence[str] = ()) -> None:
        self.columns = [c.name for c in table.c if c.name not in skip]
        self.row_type = namedtuple(f"{table.name}_pg_row", self.columns)  # type: ignore[misc]

    def row(self, values: Mapping[str, Any] | None) -> Any | None:
        return None if values is None else self.row_type(**values)


STACK = Rows(t.stack, skip=["current_deps"])  # the graph can be megabytes: never here
RESOURCE = Rows(t.resource)

STACK_JSON = (
    f"(SELECT row_to_json(s) FROM (SELECT {', '.join(STACK.columns)} FROM stack "
    "WHERE id = %(stack_id)s) s)"
)
RESOURCE_JSON = "(SELECT row_to_json(r) FROM resource r WHERE r.id = %(resource_id)s)"
SYNC_POINT = (
    "traversal_id = %(traversal_id)s AND target_resource_id = %(target_id)s "
    "AND target_is_update = %(target_is_update)s"
)
