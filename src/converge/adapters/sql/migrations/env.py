"""Alembic environment: runs converge's migrations on the connection the store hands over."""

from __future__ import annotations

from alembic import context

from converge.adapters.sql.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:  # pragma: no cover - only through SqlStore.migrate
    raise RuntimeError("converge migrations run through converge's store, not the alembic CLI")

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
