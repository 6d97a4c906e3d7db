"""PostgreSQL roles and databases converge did not make are never taken over or dropped
without ``adopt: true``; what converge did make is found by its marker and dropped, even
when no id was recorded. Against the real server (skipped without one, failing under
CI=true); every role and database a test makes is dropped afterwards."""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql

from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext
from converge.resources.postgres import PostgresDatabase, PostgresRole
from converge.resources.postgres.database import staging_name
from converge.resources.postgres.ownership import Marker

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


def unique(names: list[str], prefix: str = "cvo") -> str:
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    names.append(name)
    return name


def run(url: str, statement: sql.Composable | str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def role_row(url: str, name: str) -> tuple[object, ...] | None:
    rows = run(
        url,
        "SELECT rolcanlogin, rolconnlimit, rolpassword, "
        "shobj_description(oid, 'pg_authid') FROM pg_authid WHERE rolname = %s",
        name,
    )
    return rows[0] if rows else None


def database_comment(url: str, name: str) -> list[tuple[object, ...]]:
    return run(
        url,
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        name,
    )


def existing_login_role(url: str, name: str) -> tuple[object, ...]:
    """A role someone else made: LOGIN, a password, a comment of their own."""
    role = sql.Identifier(name)
    run(url, sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'their-Pa55' CONNECTION LIMIT 7").format(role))
    run(url, sql.SQL("COMMENT ON ROLE {} IS 'the billing app'").format(role))
    row = role_row(url, name)
    assert row is not None
    return row


async def test_an_existing_role_is_refused_untouched_and_never_dropped(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresRole(), make_context("app_role")
    name = unique(names)
    before = existing_login_role(postgres_server, name)
    props = {"server_url": postgres_server, "name": name}
    with pytest.raises(PermanentFailure) as caught:
        await plugin.create(ctx, props)
    assert str(caught.value) == (
        f"app_role: role {name!r} already exists and was not made by converge (stack 'it', "
        "resource 'app_role'); set adopt: true to manage it (it is then left in place on delete)"
    )
    assert role_row(postgres_server, name) == before  # still LOGIN, same password, comment
    # Neither a failed create (no id) nor a row that somehow recorded it drops it.
    await plugin.delete(ctx, AppliedState(None, props))
    await plugin.delete(ctx, AppliedState(name, props))
    assert role_row(postgres_server, name) == before


async def test_an_adopted_role_keeps_its_password_and_is_left_in_place_on_delete(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresRole(), make_context("app_role")
    name = unique(names)
    before = existing_login_role(postgres_server, name)
    props = {"server_url": postgres_server, "name": name, "adopt": True, "login": True}
    outcome = await plugin.create(ctx, props)
    assert outcome.physical_id == name
    row = role_row(postgres_server, name)
    assert row is not None
    assert row[:3] == (True, -1, before[2])  # converged to the template; password kept
    marker = json.loads(str(row[3]).removeprefix("converge:"))
    assert marker["adopted"] is True and marker["previous_comment"] == "the billing app"
    applied = AppliedState(name, props)
    await plugin.update(ctx, applied, {**props, "connection_limit": 2})
    assert (role_row(postgres_server, name) or ())[:3] == (True, 2, before[2])

    await plugin.delete(ctx, applied)
    assert role_row(postgres_server, name) == (True, 2, before[2], "the billing app")
    # Adopting again, then deleting with an explicit deletion_policy: Delete drops it.
    await plugin.create(ctx, props)
    await plugin.delete(dataclasses.replace(ctx, deletion_policy="Delete"), applied)
    assert role_row(postgres_server, name) is None


async def test_a_role_another_stack_manages_is_refused_naming_that_stack(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    name = unique(names)
    props = {"server_url": postgres_server, "name": name}
    theirs = dataclasses.replace(make_context("db_user"), stack_id="other", stack_name="billing")
    await PostgresRole().create(theirs, props)
    with pytest.raises(
        PermanentFailure,
        match="is managed by converge stack 'billing', resource 'db_user', not by stack 'it'",
    ):
        await PostgresRole().create(make_context("db_user"), props)


async def test_a_role_whose_create_failed_leaves_nothing_behind(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresRole(), make_context("role")
    name = unique(names)
    props = {"server_url": postgres_server, "name": name, "member_of": [unique(names)]}
    with pytest.raises(PermanentFailure, match="does not exist"):
        await plugin.create(ctx, props)
    assert role_row(postgres_server, name) is None


async def test_delete_without_an_id_finds_the_role_by_its_marker(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    """An interrupted create: the role exists with this row's marker, no id was recorded."""
    plugin, ctx = PostgresRole(), make_context("role")
    mine, theirs, replaced = unique(names), unique(names), unique(names)
    for name in (mine, theirs, replaced):
        run(postgres_server, sql.SQL("CREATE ROLE {}").format(sql.Identifier(name)))
    comment = "COMMENT ON ROLE {} IS {}"
    run(
        postgres_server,
        sql.SQL(comment).format(sql.Identifier(mine), sql.Literal(Marker.made(ctx).text())),
    )
    # Another row of the same resource (a replacement) took this one over: not ours to drop.
    other_row = Marker.made(make_context("role"))
    run(
        postgres_server,
        sql.SQL(comment).format(sql.Identifier(replaced), sql.Literal(other_row.text())),
    )
    # Only the marker counts: the explicit name alone (theirs has no marker) does not.
    await plugin.delete(ctx, AppliedState(None, {"server_url": postgres_server, "name": theirs}))
    assert role_row(postgres_server, mine) is None
    assert role_row(postgres_server, theirs) is not None
    assert role_row(postgres_server, replaced) is not None


async def test_a_legacy_marker_still_counts_as_ours(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresRole(), make_context("role")
    name = unique(names)
    run(postgres_server, sql.SQL("CREATE ROLE {}").format(sql.Identifier(name)))
    legacy = sql.Literal("converge:" + ctx.physical_name)
    run(postgres_server, sql.SQL("COMMENT ON ROLE {} IS {}").format(sql.Identifier(name), legacy))
    props = {"server_url": postgres_server, "name": name}
    await plugin.create(ctx, props)  # taken over, not refused
    await plugin.delete(ctx, AppliedState(name, props))
    assert role_row(postgres_server, name) is None


async def test_an_existing_database_with_data_is_refused_and_never_dropped(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresDatabase(), make_context("db")
    name = unique(names)
    run(postgres_server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    own_url = postgres_server.rsplit("/", 1)[0] + f"/{name}"
    run(own_url, "CREATE TABLE invoices (id int); INSERT INTO invoices VALUES (1)")
    props = {"server_url": postgres_server, "name": name}
    with pytest.raises(PermanentFailure, match=f"database {name!r} already exists and was not"):
        await plugin.create(ctx, props)
    await plugin.delete(ctx, AppliedState(None, props))
    await plugin.delete(ctx, AppliedState(name, props))
    assert run(own_url, "SELECT id FROM invoices") == [(1,)]
    assert database_comment(postgres_server, name) == [(None,)]


async def test_an_adopted_database_is_released_unless_deletion_policy_says_delete(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresDatabase(), make_context("db")
    name = unique(names)
    run(postgres_server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    run(postgres_server, sql.SQL("COMMENT ON DATABASE {} IS 'ledger'").format(sql.Identifier(name)))
    props = {"server_url": postgres_server, "name": name, "adopt": True}
    outcome = await plugin.create(ctx, props)
    assert outcome.physical_id == name
    assert '"adopted":true' in str(database_comment(postgres_server, name)[0][0])
    applied = AppliedState(name, props, outcome.data)
    await plugin.delete(ctx, applied)
    assert database_comment(postgres_server, name) == [("ledger",)]
    await plugin.create(ctx, props)
    await plugin.delete(dataclasses.replace(ctx, deletion_policy="Retain"), applied)
    assert database_comment(postgres_server, name) == [("ledger",)]
    await plugin.create(ctx, props)
    await plugin.delete(dataclasses.replace(ctx, deletion_policy="Delete"), applied)
    assert database_comment(postgres_server, name) == []


async def test_a_database_create_interrupted_before_its_id_was_recorded_is_deleted(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin = PostgresDatabase()
    ctx, staged_ctx = make_context("db"), make_context("db")
    name = unique(names)
    props = {"server_url": postgres_server, "name": name}
    made = await plugin.create(ctx, props)
    assert made.physical_id == name
    assert json.loads(str(database_comment(postgres_server, name)[0][0])[9:])["resource"] == "db"
    await plugin.delete(ctx, AppliedState(None, props))
    assert database_comment(postgres_server, name) == []
    # Killed between CREATE DATABASE and the rename: the staging database is found by name.
    staging = staging_name(staged_ctx)
    names.append(staging)
    run(postgres_server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(staging)))
    await plugin.delete(staged_ctx, AppliedState(None, props))
    assert database_comment(postgres_server, staging) == []
    # ... or made again by the create that runs once more.
    run(postgres_server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(staging)))
    assert (await plugin.create(staged_ctx, props)).physical_id == name
    assert database_comment(postgres_server, staging) == []
    await plugin.delete(staged_ctx, AppliedState(name, props))
    assert database_comment(postgres_server, name) == []


async def test_adopt_with_nothing_to_adopt_makes_one_of_its_own(
    postgres_server: str, names: list[str], make_context: MakeContext
) -> None:
    plugin, ctx = PostgresRole(), make_context("role")
    name = unique(names)
    props = {"server_url": postgres_server, "name": name, "adopt": True}
    await plugin.create(ctx, props)
    assert '"adopted"' not in str((role_row(postgres_server, name) or ())[3])
    await plugin.delete(ctx, AppliedState(name, props))
    assert role_row(postgres_server, name) is None


@pytest.mark.parametrize("plugin", [PostgresRole(), PostgresDatabase()], ids=["role", "db"])
async def test_a_create_on_an_unreachable_server_does_not_block_delete(
    plugin: PostgresRole | PostgresDatabase, make_context: MakeContext
) -> None:
    """A wrong server URL fails the create; deleting that row must not fail forever."""
    ctx, props = make_context("r"), {"server_url": "postgresql://u@127.0.0.1:1/x", "name": "n"}
    await plugin.delete(ctx, AppliedState(None, props))
    with pytest.raises(PermanentFailure, match="is not reachable"):
        await plugin.delete(ctx, AppliedState("n", props))  # it was made there: say so
