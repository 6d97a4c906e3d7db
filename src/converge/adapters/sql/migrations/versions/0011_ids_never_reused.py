"""Resource and template ids are never used twice on SQLite (AUTOINCREMENT).

Without it SQLite gives a new row the id of the newest row deleted: a traversal's graph,
which names rows by id, took a replacement made after a dropped row's deletion for that
dropped row (and replaced the resource again, leaving a thing behind); a process that had
cached a deleted stack's template by id would use it for a new stack's. PostgreSQL's
sequences never reuse ids: nothing changes there. (Events are never deleted.)

Revision ID: 0011_ids_never_reused
"""

from __future__ import annotations

from alembic import op

revision = "0011_ids_never_reused"
down_revision = "0010_sync_part"
branch_labels = None
depends_on = None

TABLES = ("raw_template", "resource")


def upgrade() -> None:
    _recreate(autoincrement=True)


def downgrade() -> None:
    _recreate(autoincrement=False)


def _recreate(*, autoincrement: bool) -> None:
    """Recreate the tables with the rows copied, ids included (with AUTOINCREMENT, the
    next id is past the largest)."""
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(
            table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}
        ):
            pass
