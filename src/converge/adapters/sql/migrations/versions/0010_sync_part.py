"""A big fan-in's sync point counted in parts (one counter row per group of predecessors).

Revision ID: 0010_sync_part
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_sync_part"
down_revision = "0009_resource_host"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sync_part",
        sa.Column("traversal_id", sa.String(36), primary_key=True),
        sa.Column("target_resource_id", sa.Integer, primary_key=True),
        sa.Column("target_is_update", sa.Boolean, primary_key=True),
        sa.Column("part", sa.Integer, primary_key=True),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("received", sa.Integer, nullable=False),
    )
    op.create_index("ix_sync_part_stack_id", "sync_part", ["stack_id"])


def downgrade() -> None:
    op.drop_index("ix_sync_part_stack_id", "sync_part")
    op.drop_table("sync_part")
