"""The store's schema: its stored version, and the Alembic migrations that bring it up.

Opening a store reads the version (one cheap query) and migrates only when it is
behind the code's newest (``migrations/__init__.py`` lists the versions).
"""

from __future__ import annotations

import functools
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

from converge.adapters.sql.connection import StoreBase
from converge.adapters.sql.migrations import SCHEMA_HEAD, SCHEMA_REVISIONS
from converge.errors import StateError

MIGRATIONS = Path(__file__).parent / "migrations"


# The advisory lock migrations hold on PostgreSQL (any constant; "cvmigr" in ASCII).
_MIGRATION_LOCK = 0x63766D69677272


class SchemaMixin(StoreBase):
    """The schema's version, and bringing it up to date (Alembic)."""

    def _bring_schema_up_to_date(self, *, read_only: bool) -> None:
        """Migrate only when the schema is behind: reading its version is one cheap query."""
        with self._engine.connect() as connection:
            revision = _schema_revision(connection)
        if revision == SCHEMA_HEAD:
            return
        if revision is not None and revision not in SCHEMA_REVISIONS:
            raise StateError(
                self.location,
                f"written by a newer converge (schema {revision}; this one knows up to "
                f"{SCHEMA_HEAD}): use that version",
            )
        if read_only:
            if revision is None:
                with self._engine.connect() as connection:
                    _refuse_foreign_tables(connection, self.location)
            raise StateError(
                self.location,
                f"the schema is {revision or 'missing'} and this converge needs {SCHEMA_HEAD}: "
                "`converge state upgrade` (or any command that writes) brings it up to date",
            )
        self.migrate()

    def migrate(self) -> None:
        """Bring the schema up to the newest migration; one already there is only read.

        Every CLI command and every engine process opens the store: running Alembic's
        upgrade each time cost more than most commands' own work.
        """
        with self._engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                # Processes starting together on an empty database take turns: without the
                # lock both create the schema and one fails (alembic_version exists).
                connection.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _MIGRATION_LOCK}
                )
            current = MigrationContext.configure(connection).get_current_revision()
            if current is not None and current == _head_revision():
                return
            if current is None:
                # Under the lock: another process's schema is committed by now, so tables
                # without a version are someone else's.
                _refuse_foreign_tables(connection, self.location)
            config = alembic_config()
            config.attributes["connection"] = connection
            command.upgrade(config, "head")


def alembic_config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


@functools.cache
def _head_revision() -> str | None:
    """The newest migration shipped with this code (read from the scripts once)."""
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def _schema_revision(connection: Connection) -> str | None:
    """The stored schema version; None for a database without one (new, or not ours)."""
    try:
        return connection.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
    except sa.exc.OperationalError as exc:  # SQLite: no such table
        connection.rollback()
        if "no such table" not in str(exc.orig):
            raise
    except sa.exc.ProgrammingError:  # PostgreSQL: undefined table
        connection.rollback()
    # Tables without a version are looked at under the migration lock (``migrate``): here
    # another process may commit a new schema between the two reads.
    return None


def _refuse_foreign_tables(connection: Connection, location: str) -> None:
    tables = sa.inspect(connection).get_table_names()
    if tables:
        raise StateError(
            location,
            f"not a converge state: it has tables ({', '.join(sorted(tables)[:5])}) "
            "but no converge schema version",
        )
