"""Migrations, on SQLite and PostgreSQL: run when the schema is behind, skipped when not."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa
from alembic import command

from converge.adapters.sql import store as store_module
from converge.adapters.sql.store import SqlStore
from converge.errors import StateError
from converge.records import NewResource
from support.store_rows import named, stack_with_rows


def test_an_up_to_date_database_is_opened_without_migrating(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    upgrades: list[str] = []
    real_upgrade = command.upgrade

    def counting_upgrade(config: object, revision: str) -> None:
        upgrades.append(revision)
        real_upgrade(config, revision)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module.command, "upgrade", counting_upgrade)
    for _ in range(3):
        engine = store_module._create_engine(database_url)
        SqlStore(engine).migrate()
        engine.dispose()
    assert upgrades == ["head"]  # the first open only


def test_a_database_behind_is_brought_up_to_date(database_url: str) -> None:
    engine = store_module._create_engine(database_url)
    try:
        SqlStore(engine).migrate()
        config = store_module._alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0004")
        assert "sync_point" not in sa.inspect(engine).get_table_names()
        SqlStore(engine).migrate()
        assert "sync_point" in sa.inspect(engine).get_table_names()
    finally:
        engine.dispose()


def test_processes_opening_an_empty_database_together_all_succeed(postgres_url: str) -> None:
    """Several serve processes started at once on a new database: one makes the schema, the
    others wait for it (they used to fail: ``alembic_version`` already exists)."""
    script = (
        "import sys\n"
        "from converge.adapters.sql.store import SqlStore\n"
        "sys.stdin.read()\n"  # every process waits for the same go
        "SqlStore.open(sys.argv[1])._engine.dispose()\n"
    )
    openers = [
        subprocess.Popen(
            [sys.executable, "-c", script, postgres_url],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    for opener in openers:
        assert opener.stdin is not None
        opener.stdin.close()
    for opener in openers:
        with opener:
            assert opener.stderr is not None
            errors = opener.stderr.read()
            assert opener.wait(timeout=60) == 0, errors


def test_a_schema_another_process_commits_while_this_one_opens_is_taken_as_converges(
    postgres_url: str,
) -> None:
    """The version is read just before another process commits a new schema, and the
    tables are listed just after: serve processes started together on an empty database
    met this as "not a converge state: it has tables … but no converge schema version".
    (SQLite's open holds the file's write lock: no other process commits meanwhile.)"""
    opening = store_module._create_engine(postgres_url)
    other = store_module._create_engine(postgres_url)
    made: list[bool] = []

    @sa.event.listens_for(opening, "handle_error")
    def other_process_migrates(context: sa.engine.ExceptionContext) -> None:
        if not made and "alembic_version" in (context.statement or ""):
            made.append(True)
            SqlStore(other).migrate()

    try:
        SqlStore(opening)._bring_schema_up_to_date(read_only=False)
        assert made  # the version read did miss the schema
    finally:
        opening.dispose()
        other.dispose()


def test_tables_of_something_else_are_refused(database_url: str) -> None:
    engine = store_module._create_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(sa.text("CREATE TABLE inventory (id INTEGER)"))
        with pytest.raises(StateError, match=r"not a converge state: it has tables \(inventory\)"):
            SqlStore(engine)._bring_schema_up_to_date(read_only=False)
        with pytest.raises(StateError, match=r"not a converge state"):
            SqlStore(engine)._bring_schema_up_to_date(read_only=True)
    finally:
        engine.dispose()


async def test_the_upgrade_that_stops_id_reuse_keeps_every_row(tmp_path: object) -> None:
    """0011 recreates SQLite's resource and template tables (AUTOINCREMENT): rows, ids and
    indexes survive it, and from then on a deleted row's id is not given again."""
    url = f"sqlite:///{tmp_path}/old.db"
    store = SqlStore.open(url)
    _, rows = await stack_with_rows(store, named(3))
    await store.close()
    engine = store_module._create_engine(url)
    try:
        config = store_module._alembic_config()
        with engine.begin() as connection:
            config.attributes["connection"] = connection
            command.downgrade(config, "0010_sync_part")
        assert "AUTOINCREMENT" not in _table_sql(engine, "resource")
    finally:
        engine.dispose()
    store = SqlStore.open(url)  # brought up to date
    try:
        assert "AUTOINCREMENT" in _table_sql(store._engine, "resource")
        assert "AUTOINCREMENT" in _table_sql(store._engine, "raw_template")
        assert "ix_resource_stack" in {
            i["name"] for i in sa.inspect(store._engine).get_indexes("resource")
        }
        assert await store.list_resources(rows[0].stack_id) == rows
        await store.delete_resources([rows[-1].id])
        made = await store.add_replacement(rows[0], NewResource("r0", "T", replaces=rows[0].id), {})
        assert made is not None and made[1].id > rows[-1].id
    finally:
        await store.close()


def _table_sql(engine: sa.Engine, table: str) -> str:
    with engine.connect() as connection:
        return str(
            connection.execute(
                sa.text("SELECT sql FROM sqlite_master WHERE name = :table"), {"table": table}
            ).scalar_one()
        )
