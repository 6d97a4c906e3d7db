"""Migrations, on SQLite and PostgreSQL: run when the schema is behind, skipped when not."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from alembic import command

from converge.adapters.sql import store as store_module
from converge.adapters.sql.store import SqlStore


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
