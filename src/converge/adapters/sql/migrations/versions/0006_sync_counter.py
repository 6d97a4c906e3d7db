"""Sync points: a counter row per traversal and target, so readiness is decided atomically.

Revision ID: 0005_sync_counter
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_sync_counter"
down_revision = "0005_api_tokens"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sync_point",
        sa.Column("traversal_id", sa.String(36), primary_key=True),
        sa.Column("target_resource_id", sa.Integer, primary_key=True),
        sa.Column("target_is_update", sa.Boolean, primary_key=True),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("received", sa.Integer, nullable=False),
    )
    op.create_index("ix_sync_point_stack_id", "sync_point", ["stack_id"])
    # Sync points of traversals in flight: count what they have already received.
    op.execute(
        "INSERT INTO sync_point "
        "(traversal_id, target_resource_id, target_is_update, stack_id, received) "
        "SELECT traversal_id, target_resource_id, target_is_update, min(stack_id), count(*) "
        "FROM sync_report GROUP BY traversal_id, target_resource_id, target_is_update"
    )


def downgrade() -> None:
    op.drop_index("ix_sync_point_stack_id", "sync_point")
    op.drop_table("sync_point")
