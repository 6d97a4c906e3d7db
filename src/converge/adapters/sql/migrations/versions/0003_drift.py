"""Drift: a traversal's reality mode on the stack, heal backoff per resource.

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stack") as batch:
        # The current traversal compares with observed reality (converge: true / heal);
        # stored so that a worker in any process knows.
        batch.add_column(sa.Column("converge", sa.Boolean, nullable=False, server_default="0"))
        # A heal: only these resource names are observed (null: all of them).
        batch.add_column(sa.Column("converge_names", sa.JSON, nullable=True))
    with op.batch_alter_table("resource") as batch:
        batch.add_column(sa.Column("heal_attempts", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("heal_last_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("heal_next_at", sa.Float, nullable=True))
        batch.add_column(sa.Column("drift_checked_at", sa.Float, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("resource") as batch:
        for name in ("drift_checked_at", "heal_next_at", "heal_last_at", "heal_attempts"):
            batch.drop_column(name)
    with op.batch_alter_table("stack") as batch:
        batch.drop_column("converge_names")
        batch.drop_column("converge")
