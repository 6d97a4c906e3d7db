"""Resource rows record the machine their real thing lives on (host affinity of work).

Revision ID: 0009_resource_host
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_resource_host"
down_revision = "0008_leases"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("resource") as batch:
        batch.add_column(sa.Column("host", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("resource") as batch:
        batch.drop_column("host")
