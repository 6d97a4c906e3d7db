"""PostgreSQL::Database: a database on a PostgreSQL server, with its owner and encoding.

Named like roles (``name``, else derived from the physical name) and carrying the same
ownership marker in its comment (``ownership.py``). ``CREATE DATABASE`` cannot share a
transaction with its comment, so a new database is made under a staging name derived from
the resource row, then marked and renamed in one transaction: an interrupted create leaves
a staging database (found by its name) or a marked one, never an unmarked database under
the wanted name. A database converge did not make is managed only with ``adopt: true``.
The owner changes in place; a new encoding replaces the database. Delete drops it even
with sessions open (``FORCE``), and only when the marker says this resource row holds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from converge.core.schema import AttributeSchema, Constraint, PropertySchema, PropertyType
from converge.errors import PermanentFailure, PluginError
from converge.resources.base import (
    AppliedState,
    ObserverContext,
    Outcome,
    ResourceContext,
    ResourcePlugin,
    ValidationContext,
)
from converge.resources.postgres.connection import (
    connect,
    delete_on_server,
    identifier_for,
    require_url,
    server_url,
    with_database,
)
from converge.resources.postgres.ownership import (
    ADOPT,
    PREFIX,
    Marker,
    OnDelete,
    held_by,
    on_delete,
    parse,
    takeover_marker,
    update_marker,
)
from converge.resources.postgres.role import _SERVER, validate_server

_DATABASES = """
SELECT d.datname, pg_get_userbyid(d.datdba), pg_encoding_to_char(d.encoding),
       shobj_description(d.oid, 'pg_database')
FROM pg_database d
WHERE NOT d.datistemplate
"""


class PostgresDatabase(ResourcePlugin):
    type_name = "PostgreSQL::Database"
    requires_packages = {"psycopg": "postgres"}
    description = "A database on a PostgreSQL server."
    properties_schema = {
        "name": PropertySchema(
            PropertyType.STRING,
            "The database's name (default: derived from the stack and resource names).",
            constraints=(Constraint("length", {"min": 1, "max": 63}),),
        ),
        "owner": PropertySchema(
            PropertyType.STRING,
            "The owning role (default: the user converge connects as).",
            update_allowed=True,
        ),
        "encoding": PropertySchema(PropertyType.STRING, "Character encoding.", default="UTF8"),
        "server_url": _SERVER,
        "adopt": ADOPT,
    }
    attributes_schema = {
        "name": AttributeSchema("The database's name.", PropertyType.STRING),
        "host": AttributeSchema("The server's host.", PropertyType.STRING),
        "port": AttributeSchema("The server's port.", PropertyType.INTEGER),
    }

    def validate(
        self, properties: Mapping[str, Any], ctx: ValidationContext
    ) -> Iterable[tuple[str, str]]:
        return validate_server(properties)

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        name = str(properties.get("name") or identifier_for(ctx.physical_name))
        url = require_url(properties, ctx.settings, ctx.resource_name)
        from psycopg import sql

        async with connect(url, ctx.resource_name, ctx.settings) as connection:
            live = await _fetch(connection, name)
            if live is None:
                staging = sql.Identifier(staging_name(ctx))
                # What an earlier, interrupted attempt of this row left half made.
                await connection.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(staging)
                )
                statement = sql.SQL("CREATE DATABASE {} ENCODING {} TEMPLATE template0").format(
                    staging, sql.Literal(str(properties.get("encoding") or "UTF8"))
                )
                if properties.get("owner"):
                    statement += sql.SQL(" OWNER {}").format(sql.Identifier(properties["owner"]))
                await connection.execute(statement)
                async with connection.transaction():
                    await _mark(connection, staging_name(ctx), Marker.made(ctx))
                    await connection.execute(
                        sql.SQL("ALTER DATABASE {} RENAME TO {}").format(
                            staging, sql.Identifier(name)
                        )
                    )
            else:
                marker = takeover_marker(
                    ctx, "database", name, live["comment"], bool(properties.get("adopt"))
                )
                if not _same_encoding(live["encoding"], properties.get("encoding")):
                    raise PermanentFailure(
                        f"{ctx.resource_name}: database {name} already exists with encoding "
                        f"{live['encoding']}"
                    )
                ctx.logger.info("taking over existing database %s (%s)", name, marker.text())
                async with connection.transaction():
                    await _set_owner(connection, name, properties.get("owner"), live)
                    await _mark(connection, name, marker)
        return Outcome(name, _facts(name, url))

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        name = str(current.physical_id)
        url = require_url(properties, ctx.settings, ctx.resource_name)
        async with (
            connect(url, ctx.resource_name, ctx.settings) as connection,
            connection.transaction(),
        ):
            live = await _fetch(connection, name)
            if live is None:
                raise PermanentFailure(f"{ctx.resource_name}: database {name} no longer exists")
            marker = update_marker(
                ctx, "database", name, live["comment"], bool(properties.get("adopt"))
            )
            await _set_owner(connection, name, properties.get("owner"), live)
            await _mark(connection, name, marker)
        return Outcome(name, _facts(name, url))

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        await delete_on_server(
            ctx, current, "database", lambda url: self._delete(ctx, current, url)
        )

    async def _delete(self, ctx: ResourceContext, current: AppliedState, url: str) -> None:
        from psycopg import sql

        async with connect(url, ctx.resource_name, ctx.settings) as connection:
            if current.physical_id is not None:
                names = [current.physical_id]
            else:
                # A create that failed or was interrupted before its id was recorded: what
                # it made is marked by this row, or still under this row's staging name.
                names = await _marked_by(connection, ctx)
                await connection.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(staging_name(ctx))
                    )
                )
            for name in names:
                live = await _fetch(connection, name)
                if live is None:
                    continue
                database = sql.Identifier(name)
                match on_delete(ctx, live["comment"]):
                    case OnDelete.KEEP:
                        ctx.logger.info("leaving database %s: not made by this resource", name)
                    case OnDelete.RELEASE:
                        previous = getattr(parse(live["comment"]), "previous_comment", None)
                        await connection.execute(
                            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                                database, sql.Literal(previous)
                            )
                        )
                        ctx.logger.info("leaving adopted database %s in place", name)
                    case OnDelete.DROP:
                        await connection.execute(
                            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database)
                        )

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        if current.physical_id is None:
            return None
        url = require_url(current.properties, ctx.settings, ctx.resource_name)
        async with connect(url, ctx.resource_name, ctx.settings) as connection:
            live = await _fetch(connection, current.physical_id)
        if live is None:
            return None
        applied = current.properties
        owner = live["owner"]
        if applied.get("owner") is None and owner == live.get("connected_as"):
            owner = None
        encoding = live["encoding"]
        if _same_encoding(encoding, applied.get("encoding")):
            encoding = applied.get("encoding")
        return {**applied, "owner": owner, "encoding": encoding}

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        # owner None: the user converge connects as (the default), as observe reports it.
        return {
            "owner": live.get("owner"),
            "encoding": _canonical_encoding(live.get("encoding")),
        }

    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        url = server_url({}, ctx.settings, "PostgreSQL::Database")
        if url is None:
            return {}
        try:
            async with connect(url, "PostgreSQL::Database", ctx.settings) as connection:
                rows = await (await connection.execute(_DATABASES)).fetchall()
                user = await (await connection.execute("SELECT current_user")).fetchone()
        except PermanentFailure as exc:
            raise PluginError(str(exc)) from None
        # The connecting user's ownership reads as "no owner given", as observe has it.
        default_owner = user[0] if user else None
        return {
            row[0]: {
                "name": row[0],
                "owner": None if row[1] == default_owner else row[1],
                "encoding": row[2],
            }
            for row in rows
        }

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        return {name: current.data.get(name) for name in names if name in self.attributes_schema}


def _facts(name: str, url: str) -> dict[str, Any]:
    parts = urlsplit(with_database(url, name))
    return {"name": name, "host": parts.hostname or "localhost", "port": parts.port or 5432}


def _canonical_encoding(value: Any) -> str:
    return str(value or "UTF8").upper().replace("-", "").replace("_", "")


def _same_encoding(live: Any, wanted: Any) -> bool:
    return _canonical_encoding(live) == _canonical_encoding(wanted)


async def _fetch(connection: Any, name: str) -> dict[str, Any] | None:
    from psycopg import sql

    query = sql.SQL(_DATABASES + "AND d.datname = {}").format(sql.Literal(name))
    row = await (await connection.execute(query)).fetchone()
    if row is None:
        return None
    user = await (await connection.execute("SELECT current_user")).fetchone()
    return {
        "name": row[0],
        "owner": row[1],
        "encoding": row[2],
        "comment": row[3],
        "connected_as": user[0] if user else None,
    }


async def _set_owner(connection: Any, name: str, owner: Any, live: Mapping[str, Any]) -> None:
    from psycopg import sql

    wanted = owner or live.get("connected_as")
    if wanted and wanted != live["owner"]:
        await connection.execute(
            sql.SQL("ALTER DATABASE {} OWNER TO {}").format(
                sql.Identifier(name), sql.Identifier(str(wanted))
            )
        )


async def _mark(connection: Any, name: str, marker: Marker) -> None:
    from psycopg import sql

    await connection.execute(
        sql.SQL("COMMENT ON DATABASE {} IS {}").format(
            sql.Identifier(name), sql.Literal(marker.text())
        )
    )


def staging_name(ctx: ResourceContext) -> str:
    """Where this resource row makes a new database before marking and renaming it."""
    return "converge_new_" + hashlib.sha256(ctx.physical_name.encode()).hexdigest()[:24]


async def _marked_by(connection: Any, ctx: ResourceContext) -> list[str]:
    """Names of the databases whose marker says the row in ``ctx`` holds them."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT d.datname, shobj_description(d.oid, 'pg_database') FROM pg_database d "
        "WHERE shobj_description(d.oid, 'pg_database') LIKE {}"
    ).format(sql.Literal(PREFIX + "%"))
    return held_by(ctx, await (await connection.execute(query)).fetchall())
