"""PostgreSQL::Role: a role on a PostgreSQL server (login, password, limits, memberships).

The role's name is the ``name`` property, else one derived from the physical name. Its
comment carries the ownership marker (``ownership.py``), written in the same transaction
as the role itself, so a create interrupted at any point leaves either nothing or a role
that its resource finds again: create takes it over, delete finds it by the marker even
when no id was recorded. A role converge did not make is managed only with ``adopt:
true``. The password is hidden and write-only: it is sent as a SCRAM verifier computed here
(the plain text never reaches the server or its logs) and never read back, so a password
changed behind converge's back is not seen as drift.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

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
    url_problem,
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

_SERVER = PropertySchema(
    PropertyType.STRING,
    "Connection URL of the server (default: the postgres_url setting or CONVERGE_POSTGRES_URL).",
)
_ROLES = """
SELECT r.rolname, r.rolcanlogin, r.rolconnlimit,
       ARRAY(SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
             WHERE m.member = r.oid ORDER BY g.rolname),
       shobj_description(r.oid, 'pg_authid')
FROM pg_roles r
"""


class PostgresRole(ResourcePlugin):
    type_name = "PostgreSQL::Role"
    requires_packages = {"psycopg": "postgres"}
    description = "A role (user or group) on a PostgreSQL server."
    properties_schema = {
        "name": PropertySchema(
            PropertyType.STRING,
            "The role's name (default: derived from the stack and resource names).",
            constraints=(Constraint("length", {"min": 1, "max": 63}),),
        ),
        "login": PropertySchema(
            PropertyType.BOOLEAN, "Whether the role may log in.", default=False, update_allowed=True
        ),
        "password": PropertySchema(
            PropertyType.STRING, "The role's password.", hidden=True, update_allowed=True
        ),
        "connection_limit": PropertySchema(
            PropertyType.INTEGER,
            "Concurrent connections allowed (-1: no limit).",
            default=-1,
            constraints=(Constraint("range", {"min": -1}),),
            update_allowed=True,
        ),
        "member_of": PropertySchema(
            PropertyType.LIST,
            "Roles this role is a member of.",
            default=[],
            item_schema=PropertySchema(PropertyType.STRING),
            update_allowed=True,
        ),
        "server_url": _SERVER,
        "adopt": ADOPT,
    }
    attributes_schema = {
        "name": AttributeSchema("The role's name.", PropertyType.STRING),
    }

    def validate(
        self, properties: Mapping[str, Any], ctx: ValidationContext
    ) -> Iterable[tuple[str, str]]:
        return validate_server(properties)

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        name = role_name(ctx, properties)
        url = require_url(properties, ctx.settings, ctx.resource_name)
        from psycopg import sql

        # One transaction: the role exists with its marker and options, or not at all.
        async with (
            connect(url, ctx.resource_name, ctx.settings) as connection,
            connection.transaction(),
        ):
            live = await _fetch(connection, name)
            if live is None:
                await connection.execute(sql.SQL("CREATE ROLE {}").format(sql.Identifier(name)))
                marker = Marker.made(ctx)
            else:
                marker = takeover_marker(
                    ctx, "role", name, live["comment"], bool(properties.get("adopt"))
                )
                ctx.logger.info("taking over existing role %s (%s)", name, marker.text())
            await _apply(connection, name, properties, live, marker)
        return Outcome(name, {"name": name})

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        name = str(current.physical_id or role_name(ctx, properties))
        url = require_url(properties, ctx.settings, ctx.resource_name)
        async with (
            connect(url, ctx.resource_name, ctx.settings) as connection,
            connection.transaction(),
        ):
            live = await _fetch(connection, name)
            if live is None:
                raise PermanentFailure(f"{ctx.resource_name}: role {name} no longer exists")
            marker = update_marker(
                ctx, "role", name, live["comment"], bool(properties.get("adopt"))
            )
            await _apply(connection, name, properties, live, marker)
        return Outcome(name, {"name": name})

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        await delete_on_server(ctx, current, "role", lambda url: self._delete(ctx, current, url))

    async def _delete(self, ctx: ResourceContext, current: AppliedState, url: str) -> None:
        from psycopg import sql

        async with connect(url, ctx.resource_name, ctx.settings) as connection:
            if current.physical_id is not None:
                names = [current.physical_id]
            else:
                # A create that failed or was interrupted before its id was recorded: what
                # this row made carries its marker, whatever name it was given.
                names = await _marked_by(connection, ctx)
            for name in names:
                live = await _fetch(connection, name)
                if live is None:
                    continue
                role = sql.Identifier(name)
                match on_delete(ctx, live["comment"]):
                    case OnDelete.KEEP:
                        ctx.logger.info("leaving role %s: not made by this resource", name)
                    case OnDelete.RELEASE:
                        previous = getattr(parse(live["comment"]), "previous_comment", None)
                        await connection.execute(
                            sql.SQL("COMMENT ON ROLE {} IS {}").format(role, sql.Literal(previous))
                        )
                        ctx.logger.info("leaving adopted role %s in place", name)
                    case OnDelete.DROP:
                        await connection.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(role))

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
        member_of = live["member_of"]
        if sorted(applied.get("member_of") or []) == member_of:
            member_of = list(applied.get("member_of") or [])
        return {
            **applied,
            "login": live["login"],
            "connection_limit": live["connection_limit"],
            "member_of": member_of,
        }

    def essence(self, live: Mapping[str, Any]) -> Mapping[str, Any]:
        return {
            "login": bool(live.get("login")),
            "connection_limit": live.get("connection_limit"),
            "member_of": sorted(live.get("member_of") or []),
        }

    async def list_all(self, ctx: ObserverContext) -> Mapping[str, Mapping[str, Any]]:
        url = server_url({}, ctx.settings, "PostgreSQL::Role")
        if url is None:
            return {}
        try:
            async with connect(url, "PostgreSQL::Role", ctx.settings) as connection:
                rows = await (await connection.execute(_ROLES)).fetchall()
        except PermanentFailure as exc:
            raise PluginError(str(exc)) from None
        return {row[0]: _live(row) for row in rows}

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        return {"name": current.physical_id} if "name" in names else {}


def validate_server(properties: Mapping[str, Any]) -> list[tuple[str, str]]:
    url = properties.get("server_url")
    if isinstance(url, str):
        problem = url_problem(url)
        if problem is not None:
            return [("server_url", problem)]
    return []


def role_name(ctx: ResourceContext, properties: Mapping[str, Any]) -> str:
    return str(properties.get("name") or identifier_for(ctx.physical_name))


def _live(row: tuple[Any, ...]) -> dict[str, Any]:
    return {
        "name": row[0],
        "login": bool(row[1]),
        "connection_limit": int(row[2]),
        "member_of": list(row[3]),
        "comment": row[4],
    }


async def _fetch(connection: Any, name: str) -> dict[str, Any] | None:
    from psycopg import sql

    query = sql.SQL(_ROLES + "WHERE r.rolname = {}").format(sql.Literal(name))
    row = await (await connection.execute(query)).fetchone()
    return None if row is None else _live(row)


async def _marked_by(connection: Any, ctx: ResourceContext) -> list[str]:
    """Names of the roles whose marker says the row in ``ctx`` holds them."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT r.rolname, shobj_description(r.oid, 'pg_authid') FROM pg_roles r "
        "WHERE shobj_description(r.oid, 'pg_authid') LIKE {}"
    ).format(sql.Literal(PREFIX + "%"))
    return held_by(ctx, await (await connection.execute(query)).fetchall())


async def _apply(
    connection: Any,
    name: str,
    properties: Mapping[str, Any],
    live: Mapping[str, Any] | None,
    marker: Marker,
) -> None:
    """Make the role's options, password, memberships and marker what the template says.

    An adopted role keeps the password it has unless the template sets one: converge never
    read it, and clearing it would lock out whoever uses it.
    """
    from psycopg import sql

    role = sql.Identifier(name)
    login = sql.SQL("LOGIN" if properties.get("login") else "NOLOGIN")
    limit = int(
        properties.get("connection_limit", -1)
        if properties.get("connection_limit") is not None
        else -1
    )
    await connection.execute(
        sql.SQL("ALTER ROLE {} WITH {} CONNECTION LIMIT {}").format(role, login, sql.Literal(limit))
    )
    password = properties.get("password")
    if password is None:
        if not marker.adopted:
            await connection.execute(sql.SQL("ALTER ROLE {} WITH PASSWORD NULL").format(role))
    else:
        verifier = connection.pgconn.encrypt_password(
            str(password).encode(), name.encode(), b"scram-sha-256"
        )
        await connection.execute(
            sql.SQL("ALTER ROLE {} WITH PASSWORD {}").format(role, sql.Literal(verifier.decode()))
        )
    wanted = {str(group) for group in properties.get("member_of") or []}
    have = set(live["member_of"]) if live is not None else set()
    for group in sorted(wanted - have):
        await connection.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(group), role))
    for group in sorted(have - wanted):
        await connection.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(group), role))
    await connection.execute(
        sql.SQL("COMMENT ON ROLE {} IS {}").format(role, sql.Literal(marker.text()))
    )
