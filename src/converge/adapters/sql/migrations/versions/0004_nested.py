"""Nested stacks: a stack made by a resource of another (a provider template) names its owner.

Revision ID: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("stack") as batch:
        batch.add_column(sa.Column("owner_id", sa.String(36), nullable=True))
        batch.create_index("ix_stack_owner", ["owner_id"])


def downgrade() -> None:
    with op.batch_alter_table("stack") as batch:
        batch.drop_index("ix_stack_owner")
        batch.drop_column("owner_id")
