"""PostgreSQL ownership through the engine: refusal, adoption and deletion_policy, failed and
killed creates then destroyed. Against the real server (skipped without one, failing under
CI=true); every role and database a test makes is dropped afterwards."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from converge.api import Converge
from converge.engine.settings import EngineSettings

SETTINGS = {"sweep_interval": 0.1, "heartbeat_interval": 0.2, "engine_stale_after": 1.0}


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


@pytest.fixture
async def cv(root: Path) -> AsyncIterator[Converge]:
    settings = EngineSettings(allowed_roots=(root,), **SETTINGS)  # type: ignore[arg-type]
    async with Converge.embedded(root / "state.db", settings=settings) as handle:
        yield handle
        for stack in await handle.list_stacks():
            await handle.delete_stack(stack.id)


def unique(names: list[str]) -> str:
    name = f"cvs_{uuid.uuid4().hex[:10]}"
    names.append(name)
    return name


def run(url: str, statement: sql.Composable | str, *args: object) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(statement, args or None)
        return cursor.fetchall() if cursor.description else []


def database(name: str, url: str, **extra: Any) -> dict[str, Any]:
    properties = {"server_url": url, "name": name, **extra.pop("properties", {})}
    return {
        "heat_template_version": "2021-04-16",
        "resources": {"db": {"type": "PostgreSQL::Database", "properties": properties, **extra}},
    }


def comment_of_database(url: str, name: str) -> list[tuple[object, ...]]:
    return run(
        url,
        "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = %s",
        name,
    )


async def test_an_existing_database_is_refused_and_survives_destroy(
    cv: Converge, postgres_server: str, names: list[str]
) -> None:
    name = unique(names)
    run(postgres_server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    own_url = postgres_server.rsplit("/", 1)[0] + f"/{name}"
    run(own_url, "CREATE TABLE invoices (id int); INSERT INTO invoices VALUES (1)")

    created = await cv.create_stack(
        "pg_refuse", database(name, postgres_server), disable_rollback=True
    )
    assert created.stack_status == "CREATE_FAILED"
    assert f"database {name!r} already exists and was not made by converge" in (
        created.stack_status_reason
    )
    assert "set adopt: true to manage it" in created.stack_status_reason
    deleted = await cv.delete_stack("pg_refuse")
    assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
    assert run(own_url, "SELECT id FROM invoices") == [(1,)]


async def test_an_adopted_database_stays_on_destroy_unless_deletion_policy_says_delete(
    cv: Converge, postgres_server: str, names: list[str]
) -> None:
    kept, dropped = unique(names), unique(names)
    for name in (kept, dropped):
        run(postgres_server, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        run(
            postgres_server,
            sql.SQL("COMMENT ON DATABASE {} IS 'theirs'").format(sql.Identifier(name)),
        )
    adopt = {"adopt": True}
    stacks = {
        "pg_keep": database(kept, postgres_server, properties=adopt),
        "pg_drop": database(dropped, postgres_server, properties=adopt, deletion_policy="Delete"),
    }
    for stack, template in stacks.items():
        created = await cv.create_stack(stack, template)
        assert created.stack_status == "CREATE_COMPLETE", created.stack_status_reason
        deleted = await cv.delete_stack(stack)
        assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
    assert comment_of_database(postgres_server, kept) == [("theirs",)]
    assert comment_of_database(postgres_server, dropped) == []


async def test_a_role_whose_create_failed_is_gone_after_destroy(
    cv: Converge, postgres_server: str, names: list[str]
) -> None:
    name = unique(names)
    template = {
        "heat_template_version": "2021-04-16",
        "resources": {
            "role": {
                "type": "PostgreSQL::Role",
                "properties": {
                    "server_url": postgres_server,
                    "name": name,
                    "member_of": ["no_such_role_cvs"],
                },
            }
        },
    }
    created = await cv.create_stack("pg_failed_role", template, disable_rollback=True)
    assert created.stack_status == "CREATE_FAILED"
    assert 'role "no_such_role_cvs" does not exist' in created.stack_status_reason
    deleted = await cv.delete_stack("pg_failed_role")
    assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
    assert run(postgres_server, "SELECT 1 FROM pg_roles WHERE rolname = %s", name) == []


CRASHING = """
import asyncio, sys
from pathlib import Path
from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.registry import PluginRegistry, default_registry

root, role, url = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
normal, registry = default_registry(), PluginRegistry()
registry.register(type(normal.plugin("PostgreSQL::Role")), type_name="PostgreSQL::Role")
# After the database's create made it, say so and hang: the test kills this engine there,
# before the engine records an id. The role it belongs to was created and recorded.
base = type(normal.plugin("PostgreSQL::Database"))
async def create(self, ctx, properties):
    await base.create(self, ctx, properties)
    (root / "made-db").touch()
    await asyncio.sleep(3600)
registry.register(type("Hanging", (base,), {"create": create}), type_name="PostgreSQL::Database")
settings = EngineSettings(allowed_roots=(root,), sweep_interval=0.1, heartbeat_interval=0.2,
                          engine_stale_after=1.0)
template = {
    "heat_template_version": "2021-04-16",
    "parameters": {"name": {"type": "string"}, "url": {"type": "string"}},
    "resources": {
        "role": {"type": "PostgreSQL::Role", "properties": {
            "name": {"get_param": "name"}, "server_url": {"get_param": "url"}}},
        "db": {"type": "PostgreSQL::Database", "properties": {
            "name": {"get_param": "name"}, "server_url": {"get_param": "url"},
            "owner": {"get_resource": "role"}}},
    },
}
async def main():
    async with Converge.embedded(root / "state.db", settings=settings, registry=registry) as cv:
        await cv.create_stack("crashy", template, parameters={"name": role, "url": url})
asyncio.run(main())
"""


async def test_creates_killed_before_their_ids_were_recorded_are_deleted_by_destroy(
    root: Path, postgres_server: str, names: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server is named only by a property: the create's stored intent finds it. The
    database is owned by the role: its stored requirements delete it before the role."""
    monkeypatch.delenv("CONVERGE_POSTGRES_URL", raising=False)
    name = unique(names)
    program = root / "crash.py"
    program.write_text(textwrap.dedent(CRASHING))
    crashing = subprocess.Popen([sys.executable, str(program), str(root), name, postgres_server])
    try:
        deadline = time.monotonic() + 30
        while not (root / "made-db").exists() and crashing.poll() is None:
            assert time.monotonic() < deadline, "the creates did not run"
            await asyncio.sleep(0.05)
        assert crashing.poll() is None, "the crashing engine ended by itself"
        crashing.send_signal(signal.SIGKILL)
        crashing.wait(10)
    finally:
        crashing.kill()
        crashing.wait(10)
    assert run(postgres_server, "SELECT 1 FROM pg_roles WHERE rolname = %s", name) == [(1,)]
    assert len(comment_of_database(postgres_server, name)) == 1

    settings = EngineSettings(allowed_roots=(root,), **SETTINGS)  # type: ignore[arg-type]
    async with Converge.embedded(root / "state.db", settings=settings) as cv:
        deleted = await cv.delete_stack("crashy")
    assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
    assert run(postgres_server, "SELECT 1 FROM pg_roles WHERE rolname = %s", name) == []
    assert comment_of_database(postgres_server, name) == []
