"""The relational schema (SQLAlchemy Core): the truth every engine process shares."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

metadata = MetaData()

raw_template = Table(
    "raw_template",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("stack_id", String(36), nullable=False, index=True),
    Column("template", JSON, nullable=False),
    Column("environment", JSON, nullable=False),
    Column("files", JSON, nullable=False),
    Column("parameters", JSON, nullable=False),
    Column("created_at", Float, nullable=False),
    sqlite_autoincrement=True,  # a cached template's id never names another (0011)
)

stack = Table(
    "stack",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("name", String(255), nullable=False),
    Column("project_id", String(255), nullable=False),
    # "" while the stack lives, its id once deleted: keeps names unique among live stacks
    # with a plain unique constraint that every database supports.
    Column("deleted_marker", String(36), nullable=False, default=""),
    Column("action", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("status_reason", Text, nullable=False, default=""),
    Column("raw_template_id", Integer, nullable=True),
    Column("prev_raw_template_id", Integer, nullable=True),
    Column("current_traversal", String(36), nullable=False, default=""),
    Column("current_deps", JSON, nullable=True),
    Column("disable_rollback", Boolean, nullable=False, default=False),
    Column("timeout_mins", Float, nullable=True),
    Column("drift_policy", String(16), nullable=False, default="notify"),
    Column("deadline", Float, nullable=True),
    Column("outputs", JSON, nullable=True),
    Column("tags", JSON, nullable=True),
    Column("atomic_key", Integer, nullable=False, default=0),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=True),
    # 0003: the current traversal compares with observed reality; a heal's resource names
    Column("converge", Boolean, nullable=False, default=False),
    Column("converge_names", JSON, nullable=True),
    # 0004: the stack that owns this one (a provider template resource made it)
    Column("owner_id", String(36), nullable=True),
    UniqueConstraint("project_id", "name", "deleted_marker", name="uq_stack_name"),
    Index("ix_stack_owner", "owner_id"),
)

resource = Table(
    "resource",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("stack_id", String(36), ForeignKey("stack.id"), nullable=False),
    Column("name", String(255), nullable=False),
    Column("type", String(255), nullable=False),
    Column("action", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("status_reason", Text, nullable=False, default=""),
    Column("physical_resource_id", String(255), nullable=True),
    Column("current_template_id", Integer, nullable=True),
    Column("requires", JSON, nullable=False),
    Column("replaces", Integer, nullable=True),
    Column("replaced_by", Integer, nullable=True),
    Column("engine_id", String(36), nullable=True),
    Column("atomic_key", Integer, nullable=False, default=0),
    Column("properties_data", JSON, nullable=False),
    Column("plugin_data", JSON, nullable=False),
    Column("attr_data", JSON, nullable=False),
    Column("deletion_policy", String(16), nullable=False, default="Delete"),
    Column("hook_pending", JSON, nullable=True),
    Column("cleared_hooks", JSON, nullable=False),
    Column("drift_status", String(16), nullable=False, default="NOT_CHECKED"),
    Column("drift_detail", JSON, nullable=True),
    Column("created_at", Float, nullable=False),
    Column("updated_at", Float, nullable=True),
    # 0003: heal backoff (core.heal) and when drift was last looked at
    Column("heal_attempts", Integer, nullable=False, default=0),
    Column("heal_last_at", Float, nullable=True),
    Column("heal_next_at", Float, nullable=True),
    Column("drift_checked_at", Float, nullable=True),
    # 0009: the machine the real thing lives on, for types bound to their host
    Column("host", String(255), nullable=True),
    Index("ix_resource_stack", "stack_id"),
    # A graph names rows by id: a deleted row's id must never name a new one (0011).
    sqlite_autoincrement=True,
)

# A sync point is the set of reports its node has received in a traversal; the primary key
# makes a duplicate report (a re-delivered message) count once.
sync_report = Table(
    "sync_report",
    metadata,
    Column("traversal_id", String(36), primary_key=True),
    Column("target_resource_id", Integer, primary_key=True),
    Column("target_is_update", Boolean, primary_key=True),
    Column("sender_resource_id", Integer, primary_key=True),
    Column("sender_is_update", Boolean, primary_key=True),
    Column("stack_id", String(36), nullable=False, index=True),
    Column("data", JSON, nullable=False),
)

# 0005: how many distinct predecessors have reported to a sync point. Readiness is decided
# by incrementing this row (an upsert that returns the new count), never by counting
# reports: under READ COMMITTED two predecessors committing at once each counted N-1.
# The row lock serializes the increments, so exactly one reporter sees the last one.
sync_point = Table(
    "sync_point",
    metadata,
    Column("traversal_id", String(36), primary_key=True),
    Column("target_resource_id", Integer, primary_key=True),
    Column("target_is_update", Boolean, primary_key=True),
    Column("stack_id", String(36), nullable=False, index=True),
    Column("received", Integer, nullable=False),
)

# 0010: a big fan-in's counter split in parts (``TraversalGraph.fan_in_part``), on
# PostgreSQL: each predecessor increments its group's row, the one completing a group
# increments the ``sync_point`` row, which then counts complete groups. Ten thousand
# finishes no longer wait on one row lock, only on their group's.
sync_part = Table(
    "sync_part",
    metadata,
    Column("traversal_id", String(36), primary_key=True),
    Column("target_resource_id", Integer, primary_key=True),
    Column("target_is_update", Boolean, primary_key=True),
    Column("part", Integer, primary_key=True),
    Column("stack_id", String(36), nullable=False, index=True),
    Column("received", Integer, nullable=False),
)

event = Table(
    "event",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("stack_id", String(36), nullable=False),
    Column("resource_name", String(255), nullable=False),
    Column("physical_resource_id", String(255), nullable=True),
    Column("resource_type", String(255), nullable=False),
    Column("action", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("reason", Text, nullable=False),
    Column("created_at", Float, nullable=False),
    Index("ix_event_stack", "stack_id", "id"),
)

service = Table(
    "service",
    metadata,
    Column("engine_id", String(36), primary_key=True),
    Column("host", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("roles", JSON, nullable=False),
    Column("started_at", Float, nullable=False),
    Column("heartbeat_at", Float, nullable=False),
    # Which process the pid was ("<boot id>:<start ticks>"): a pid alone is recycled.
    Column("process_start", String(80), nullable=True),
)

# 0008: a named lease (``heal:<stack>``) that one process holds at a
# time across every process of the database: taken by compare-and-swap, free again when
# released, when it expires, or when its holder's heartbeat went stale.
lease = Table(
    "lease",
    metadata,
    Column("name", String(80), primary_key=True),
    Column("holder", String(36), nullable=False),
    # None: held for as long as the holder lives
    Column("expires_at", Float, nullable=True),
)
