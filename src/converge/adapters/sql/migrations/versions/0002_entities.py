"""The synchronizer's baseline: one row per observed entity, one sequence number per type.

Revision ID: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "entity",
        sa.Column("type", sa.String(255), primary_key=True),
        sa.Column("physical_id", sa.String(255), primary_key=True),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.Column("essence", sa.JSON, nullable=False),
        sa.Column("stack_id", sa.String(36), nullable=True),
        sa.Column("resource_id", sa.Integer, nullable=True),
        sa.Column("resource_name", sa.String(255), nullable=True),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("observed_at", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
    )
    op.create_index("ix_entity_stack", "entity", ["stack_id"])
    op.create_table(
        "entity_seq",
        sa.Column("type", sa.String(255), primary_key=True),
        sa.Column("seq", sa.Integer, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("entity_seq")
    op.drop_index("ix_entity_stack", table_name="entity")
    op.drop_table("entity")
