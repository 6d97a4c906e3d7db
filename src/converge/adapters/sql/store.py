"""The SQL store: SQLite (embedded default) or PostgreSQL through SQLAlchemy Core.

Each public coroutine is one short transaction run on the store's own threads: one thread
for SQLite (its single writer, so transactions never wait on each other's locks), a small
pool for PostgreSQL. Rows that workers race on (stack, resource) are written with
compare-and-swap on ``atomic_key``; sync point reports are keyed by sender so a duplicate
counts once.

``SqlStore`` is composed of one mixin per concept over the connection plumbing
(``connection.py``): ``schema.py``, ``templates.py``, ``stacks.py``, ``resources.py``,
``sync_points.py``, ``checks.py`` (a resource check's reads and finish), ``events.py``,
``services.py`` (and leases); rows become records in ``records.py``. This module
composes the store and opens it.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from pathlib import Path

import sqlalchemy as sa
from alembic import command

from converge.adapters.sql import state_file
from converge.adapters.sql.checks import ChecksMixin
from converge.adapters.sql.connection import create_engine, fatal_error, safe_url
from converge.adapters.sql.entities import EntityStore
from converge.adapters.sql.schema import MIGRATIONS, SchemaMixin, alembic_config
from converge.adapters.sql.services import LeasesMixin, ServicesMixin
from converge.errors import StoreError

# Imported from here by other modules and tests, from before the store was split by
# concept (the migration tests patch Alembic's ``command`` and make engines here).
__all__ = ["MIGRATIONS", "SqlStore", "_alembic_config", "_create_engine", "command", "sqlite_url"]
_alembic_config = alembic_config
_create_engine = create_engine


def sqlite_url(path: str | os.PathLike[str]) -> str:
    return f"sqlite:///{Path(path).resolve()}"


class SqlStore(ChecksMixin, ServicesMixin, LeasesMixin, SchemaMixin):
    """The store port over a SQLAlchemy engine."""

    # --- lifecycle -------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, clock: Callable[[], float] = time.time) -> SqlStore:
        """Connect, bring the schema up to date if it is behind, and return the store."""
        if url.startswith("sqlite:///") and not url.startswith("sqlite:///file:"):
            path = url[len("sqlite:///") :]
            if path and path != ":memory:":
                return cls.open_file(path, clock=clock)
        return cls._open_url(url, safe_url(url), clock=clock, read_only=False)

    @classmethod
    def open_file(
        cls,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        read_only: bool = False,
    ) -> SqlStore:
        """The embedded state file: checked first (``state_file.prepare``), made if missing.

        ``read_only`` opens it for reading alone (SQLite's ``mode=ro``): no file is made,
        no migration runs, and a read-only file or disk is fine.
        """
        state = state_file.prepare(path, create=not read_only)
        if read_only:
            url = f"sqlite:///{state_file.read_only_uri(state)}&uri=true"
        else:
            url = f"sqlite:///{state}"
        return cls._open_url(url, str(state), clock=clock, read_only=read_only)

    @classmethod
    def _open_url(
        cls, url: str, location: str, *, clock: Callable[[], float], read_only: bool
    ) -> SqlStore:
        store: SqlStore | None = None
        try:
            engine = create_engine(url, read_only=read_only)
            store = cls(engine, clock=clock, location=location)
            store._bring_schema_up_to_date(read_only=read_only)
        except sa.exc.DBAPIError as exc:
            if store is not None:
                store._discard()
            fatal = fatal_error(location, exc.orig)
            if fatal is not None:
                raise fatal from exc
            raise StoreError(f"cannot open the database {location}: {exc.orig}") from exc
        except BaseException:
            if store is not None:
                store._discard()
            raise
        return store

    @functools.cached_property
    def entities(self) -> EntityStore:
        """The synchronizer's baseline, in the same database and on the same threads."""
        return EntityStore(self)
