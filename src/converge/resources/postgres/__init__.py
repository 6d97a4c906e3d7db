"""Resource types whose reality is a PostgreSQL server: roles and databases."""

from __future__ import annotations

from converge.resources.base import ResourcePlugin
from converge.resources.postgres.database import PostgresDatabase
from converge.resources.postgres.role import PostgresRole

POSTGRES_TYPES: tuple[type[ResourcePlugin], ...] = (PostgresRole, PostgresDatabase)

__all__ = ["POSTGRES_TYPES", "PostgresDatabase", "PostgresRole"]
