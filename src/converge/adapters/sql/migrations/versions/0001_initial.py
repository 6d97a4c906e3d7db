"""Initial schema: templates, stacks, resources, sync points, events, services.

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "raw_template",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("stack_id", sa.String(36), nullable=False, index=True),
        sa.Column("template", sa.JSON, nullable=False),
        sa.Column("environment", sa.JSON, nullable=False),
        sa.Column("files", sa.JSON, nullable=False),
        sa.Column("parameters", sa.JSON, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_table(
        "stack",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("project_id", sa.String(255), nullable=False),
        sa.Column("deleted_marker", sa.String(36), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text, nullable=False),
        sa.Column("raw_template_id", sa.Integer, nullable=True),
        sa.Column("prev_raw_template_id", sa.Integer, nullable=True),
        sa.Column("current_traversal", sa.String(36), nullable=False),
        sa.Column("current_deps", sa.JSON, nullable=True),
        sa.Column("disable_rollback", sa.Boolean, nullable=False),
        sa.Column("timeout_mins", sa.Float, nullable=True),
        sa.Column("drift_policy", sa.String(16), nullable=False),
        sa.Column("deadline", sa.Float, nullable=True),
        sa.Column("outputs", sa.JSON, nullable=True),
        sa.Column("tags", sa.JSON, nullable=True),
        sa.Column("atomic_key", sa.Integer, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=True),
        sa.UniqueConstraint("project_id", "name", "deleted_marker", name="uq_stack_name"),
    )
    op.create_table(
        "resource",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("stack_id", sa.String(36), sa.ForeignKey("stack.id"), nullable=False),
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("status_reason", sa.Text, nullable=False),
        sa.Column("physical_resource_id", sa.String(255), nullable=True),
        sa.Column("current_template_id", sa.Integer, nullable=True),
        sa.Column("requires", sa.JSON, nullable=False),
        sa.Column("replaces", sa.Integer, nullable=True),
        sa.Column("replaced_by", sa.Integer, nullable=True),
        sa.Column("engine_id", sa.String(36), nullable=True),
        sa.Column("atomic_key", sa.Integer, nullable=False),
        sa.Column("properties_data", sa.JSON, nullable=False),
        sa.Column("plugin_data", sa.JSON, nullable=False),
        sa.Column("attr_data", sa.JSON, nullable=False),
        sa.Column("deletion_policy", sa.String(16), nullable=False),
        sa.Column("hook_pending", sa.JSON, nullable=True),
        sa.Column("cleared_hooks", sa.JSON, nullable=False),
        sa.Column("drift_status", sa.String(16), nullable=False),
        sa.Column("drift_detail", sa.JSON, nullable=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("updated_at", sa.Float, nullable=True),
    )
    op.create_index("ix_resource_stack", "resource", ["stack_id"])
    op.create_table(
        "sync_report",
        sa.Column("traversal_id", sa.String(36), primary_key=True),
        sa.Column("target_resource_id", sa.Integer, primary_key=True),
        sa.Column("target_is_update", sa.Boolean, primary_key=True),
        sa.Column("sender_resource_id", sa.Integer, primary_key=True),
        sa.Column("sender_is_update", sa.Boolean, primary_key=True),
        sa.Column("stack_id", sa.String(36), nullable=False, index=True),
        sa.Column("data", sa.JSON, nullable=False),
    )
    op.create_table(
        "event",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("stack_id", sa.String(36), nullable=False),
        sa.Column("resource_name", sa.String(255), nullable=False),
        sa.Column("physical_resource_id", sa.String(255), nullable=True),
        sa.Column("resource_type", sa.String(255), nullable=False),
        sa.Column("action", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
    )
    op.create_index("ix_event_stack", "event", ["stack_id", "id"])
    op.create_table(
        "service",
        sa.Column("engine_id", sa.String(36), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("roles", sa.JSON, nullable=False),
        sa.Column("started_at", sa.Float, nullable=False),
        sa.Column("heartbeat_at", sa.Float, nullable=False),
    )


def downgrade() -> None:
    for name in ("service", "event", "sync_report", "resource", "stack", "raw_template"):
        op.drop_table(name)
