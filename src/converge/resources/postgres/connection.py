"""Reaching the PostgreSQL server a resource names: its URL, a connection, clear errors.

The server is the resource's ``server_url`` property, else the ``postgres_url`` setting,
else the environment's ``CONVERGE_POSTGRES_URL``. URLs are shown with any password masked.
Statements elsewhere are composed with ``psycopg.sql`` (identifier and literal quoting by
the driver), never by string formatting.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from converge.errors import PermanentFailure

if TYPE_CHECKING:
    import psycopg

    from converge.resources.base import AppliedState, ResourceContext

URL_VARIABLE = "CONVERGE_POSTGRES_URL"
DEFAULT_CONNECT_TIMEOUT = 5.0
MAX_IDENTIFIER = 63


class ServerUnreachable(PermanentFailure):
    """The server could not be connected to (nothing was sent to it)."""


def server_url(
    properties: Mapping[str, Any], settings: Mapping[str, Any], resource: str
) -> str | None:
    """The URL to use; None when nothing names a server."""
    url = (
        properties.get("server_url") or settings.get("postgres_url") or os.environ.get(URL_VARIABLE)
    )
    return str(url) if url else None


def require_url(properties: Mapping[str, Any], settings: Mapping[str, Any], resource: str) -> str:
    url = server_url(properties, settings, resource)
    if url is None:
        raise PermanentFailure(
            f"{resource}: no PostgreSQL server: set the server_url property or "
            f"{URL_VARIABLE} in the environment"
        )
    return url


def redact(url: str) -> str:
    """The URL with its password (if any) masked."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def url_problem(url: str) -> str | None:
    """What is wrong with a server URL's form (checked at validation, no connection)."""
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        return f"not a valid URL: {exc}"
    if parts.scheme not in ("postgresql", "postgres"):
        return f"expected a postgresql:// URL, got {redact(url)!r}"
    return None


def with_database(url: str, database: str) -> str:
    """The same server and user, connected to another database."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


def identifier_for(physical_name: str) -> str:
    """A PostgreSQL name from a physical name: lower case, ``[a-z0-9_]``, at most 63 bytes."""
    name = re.sub(r"[^a-z0-9_]", "_", physical_name.lower())
    if not name or not (name[0].isalpha() or name[0] == "_"):
        name = "c_" + name
    if len(name) > MAX_IDENTIFIER:
        # Keep the end: the physical name ends with the short hash that makes it unique.
        name = name[: MAX_IDENTIFIER - 9] + "_" + name[-8:]
    return name


@asynccontextmanager
async def connect(
    url: str, resource: str, settings: Mapping[str, Any]
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """An autocommit connection; a server that cannot be reached is a clear failure."""
    import psycopg

    timeout = float(settings.get("postgres_connect_timeout", DEFAULT_CONNECT_TIMEOUT))
    try:
        connection = await psycopg.AsyncConnection.connect(
            url, autocommit=True, connect_timeout=max(1, int(timeout))
        )
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise ServerUnreachable(
            f"{resource}: PostgreSQL server {redact(url)} is not reachable: {reason}"
        ) from None
    try:
        yield connection
    except psycopg.Error as exc:
        raise PermanentFailure(f"{resource}: PostgreSQL: {_message(exc)}") from None
    finally:
        await connection.close()


def _message(exc: Exception) -> str:
    diagnostic = getattr(exc, "diag", None)
    primary = getattr(diagnostic, "message_primary", None)
    return str(primary or exc).strip()


async def delete_on_server(
    ctx: ResourceContext,
    current: AppliedState,
    kind: str,
    delete: Callable[[str], Awaitable[None]],
) -> None:
    """Run ``delete`` against the resource's server. A create that never recorded an id,
    on a server that cannot be reached (a wrong URL, most likely what failed it), left
    nothing that can be found: that delete succeeds, since failing would keep the stack
    from ever being deleted."""
    url = server_url(current.properties, ctx.settings, ctx.resource_name)
    if url is None:
        return
    try:
        await delete(url)
    except ServerUnreachable:
        if current.physical_id is not None:
            raise
        ctx.logger.warning("no %s to delete: its server is not reachable", kind)
