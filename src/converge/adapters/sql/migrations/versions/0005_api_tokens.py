"""API tokens: what a REST request's X-Auth-Token stands for (a project and a role).

Revision ID: 0005_api_tokens
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_api_tokens"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "api_token",
        sa.Column("id", sa.String(16), primary_key=True),
        sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("revoked_at", sa.Float, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("api_token")
