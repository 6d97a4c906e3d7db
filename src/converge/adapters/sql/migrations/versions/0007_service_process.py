"""Service rows say which process they are (boot and start time), not only its pid.

Revision ID: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006_sync_counter"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("service") as batch:
        batch.add_column(sa.Column("process_start", sa.String(80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("service") as batch:
        batch.drop_column("process_start")
