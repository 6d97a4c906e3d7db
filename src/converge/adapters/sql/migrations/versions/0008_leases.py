"""Leases: the heal lock and the check of a stack held across engine processes.

Revision ID: 0008_leases
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_leases"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lease",
        sa.Column("name", sa.String(80), primary_key=True),
        sa.Column("holder", sa.String(36), nullable=False),
        sa.Column("expires_at", sa.Float, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("lease")
