"""PostgreSQL::Role and PostgreSQL::Database against the real server (skipped without one,
failing under CI=true)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql

from converge.engine.clock import SystemClock
from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ObserverContext, ResourceContext
from converge.resources.postgres import PostgresDatabase, PostgresRole
from converge.resources.postgres.connection import identifier_for, redact

MakeContext = Callable[..., ResourceContext]


@pytest.fixture
def names(postgres_server: str) -> Iterator[list[str]]:
    """Role and database names the test uses; whatever is left is dropped afterwards."""
    used: list[str] = []
    yield used
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        for name in used:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        for name in used:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def unique(names: list[str], prefix: str = "cvt") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    names.append(name)
    return name


def catalog(url: str, query: str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, args).fetchall()


async def test_role_lifecycle_adoption_and_drift(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresRole(), make_context("role")
    group = unique(names)
    catalog(postgres_server, "SELECT 1")
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(group)))
    name = unique(names)
    wanted = {
        "server_url": postgres_server,
        "name": name,
        "login": True,
        "password": "s3cret-Pa55",
        "connection_limit": 3,
        "member_of": [group],
    }
    outcome = await plugin.create(ctx, wanted)
    assert outcome.physical_id == name
    row = catalog(
        postgres_server,
        "SELECT rolcanlogin, rolconnlimit, rolpassword FROM pg_authid WHERE rolname = %s",
        name,
    )[0]
    assert row[0] is True and row[1] == 3
    assert str(row[2]).startswith("SCRAM-SHA-256$") and "s3cret" not in str(row[2])
    applied = AppliedState(name, wanted, outcome.data)
    live = await plugin.observe(ctx, applied)
    assert live is not None and plugin.essence(live) == plugin.essence(wanted)

    # An interrupted create runs again: the role is adopted, not made twice.
    assert (await plugin.create(ctx, wanted)).physical_id == name

    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(
            sql.SQL("ALTER ROLE {} NOLOGIN CONNECTION LIMIT 9").format(sql.Identifier(name))
        )
    drifted = await plugin.observe(ctx, applied)
    assert drifted is not None and drifted["login"] is False and drifted["connection_limit"] == 9

    listed = await plugin.list_all(
        ObserverContext(
            SystemClock(), logging.getLogger("t"), settings={"postgres_url": postgres_server}
        )
    )
    assert listed[name]["login"] is False and listed[name]["member_of"] == [group]
    assert "postgres" in listed  # unmanaged roles are listed too

    updated = {**wanted, "member_of": [], "connection_limit": -1}
    await plugin.update(ctx, applied, updated)
    assert plugin.essence((await plugin.observe(ctx, applied)) or {}) == plugin.essence(updated)

    await plugin.delete(ctx, AppliedState(name, updated))
    assert catalog(postgres_server, "SELECT 1 FROM pg_roles WHERE rolname = %s", name) == []
    await plugin.delete(ctx, AppliedState(name, updated))  # gone: success
    assert await plugin.observe(ctx, applied) is None


async def test_a_derived_role_name_and_replacement_safe_cleanup(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin = PostgresRole()
    ctx = make_context("app")
    derived = identifier_for(ctx.physical_name)
    names.append(derived)
    outcome = await plugin.create(ctx, {"server_url": postgres_server})
    assert outcome.physical_id == derived
    # A replacement row adopts an explicitly named role; the old row's cleanup keeps it.
    explicit = unique(names)
    old, new = make_context("app"), make_context("app")
    props = {"server_url": postgres_server, "name": explicit}
    first = await plugin.create(old, props)
    await plugin.create(new, props)
    await plugin.delete(old, AppliedState(first.physical_id, props))
    assert catalog(postgres_server, "SELECT 1 FROM pg_roles WHERE rolname = %s", explicit)
    # A row that never recorded an id only looks for its derived name.
    await plugin.delete(ctx, AppliedState(None, {"server_url": postgres_server}))
    assert not catalog(postgres_server, "SELECT 1 FROM pg_roles WHERE rolname = %s", derived)


async def test_database_owned_by_a_role(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    role_name, db_name = unique(names), unique(names)
    role_ctx, db_ctx = make_context("role"), make_context("db")
    await PostgresRole().create(role_ctx, {"server_url": postgres_server, "name": role_name})
    plugin = PostgresDatabase()
    wanted = {
        "server_url": postgres_server,
        "name": db_name,
        "owner": role_name,
        "encoding": "UTF8",
    }
    outcome = await plugin.create(db_ctx, wanted)
    assert outcome.data == {"name": db_name, "host": "127.0.0.1", "port": 5432}
    assert catalog(
        postgres_server,
        "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = %s",
        db_name,
    ) == [(role_name,)]
    applied = AppliedState(db_name, wanted, outcome.data)
    assert plugin.essence(await plugin.observe(db_ctx, applied) or {}) == plugin.essence(wanted)
    assert (await plugin.create(db_ctx, wanted)).physical_id == db_name  # adopted

    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO postgres").format(sql.Identifier(db_name)))
    assert (await plugin.observe(db_ctx, applied) or {})["owner"] == "postgres"
    await plugin.update(db_ctx, applied, wanted)
    assert (await plugin.observe(db_ctx, applied) or {})["owner"] == role_name

    listed = await plugin.list_all(
        ObserverContext(
            SystemClock(), logging.getLogger("t"), settings={"postgres_url": postgres_server}
        )
    )
    assert listed[db_name] == {"name": db_name, "owner": role_name, "encoding": "UTF8"}

    await plugin.delete(db_ctx, applied)
    assert await plugin.observe(db_ctx, applied) is None
    await plugin.delete(db_ctx, applied)


async def test_a_server_that_is_down_is_a_clear_error_without_the_password(
    make_context: MakeContext,
) -> None:
    url = "postgresql://admin:hunter2@127.0.0.1:1/postgres"
    with pytest.raises(PermanentFailure) as caught:
        await PostgresRole().create(
            make_context("db_role"), {"server_url": url, "password": "pw-x"}
        )
    message = str(caught.value)
    assert message.startswith(
        "db_role: PostgreSQL server postgresql://admin:***@127.0.0.1:1/postgres"
    )
    assert "not reachable" in message and "hunter2" not in message and "pw-x" not in message
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"


async def test_no_server_configured_names_the_ways_to_configure_one(
    make_context: MakeContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVERGE_POSTGRES_URL", raising=False)
    with pytest.raises(PermanentFailure, match="role: no PostgreSQL server: set the server_url"):
        await PostgresRole().create(make_context("role"), {})
