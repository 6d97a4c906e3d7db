"""Shared fixtures: databases (SQLite always; PostgreSQL when the server is there)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from support.databases import fresh_database

PG_ADMIN_URL = os.environ.get("CONVERGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").lower() == "true"


def _pg_available() -> str | None:
    """None if PostgreSQL can be used, else the reason it cannot."""
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - installed with the dev extra
        return f"psycopg not installed: {exc}"
    try:
        with psycopg.connect(PG_ADMIN_URL, connect_timeout=3):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL not reachable at {PG_ADMIN_URL}: {exc}"


@pytest.fixture(scope="session")
def postgres_server() -> str:
    reason = _pg_available()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return PG_ADMIN_URL


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database for one test, dropped afterwards."""
    with fresh_database(postgres_server) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """Each store test runs on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/converge.db"
    return str(request.getfixturevalue("postgres_url"))


AMQP_URL = os.environ.get("CONVERGE_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")


def _amqp_available() -> str | None:
    """None if RabbitMQ can be used, else the reason it cannot."""
    import socket
    from urllib.parse import urlsplit

    try:
        import aio_pika  # noqa: F401
    except ImportError as exc:  # pragma: no cover - installed with the dev extra
        return f"aio-pika not installed: {exc}"
    where = urlsplit(AMQP_URL)
    try:
        with socket.create_connection((where.hostname or "127.0.0.1", where.port or 5672), 3):
            return None
    except OSError as exc:
        return f"RabbitMQ not reachable at {where.hostname}:{where.port}: {exc}"


@pytest.fixture(scope="session")
def rabbitmq_url() -> str:
    reason = _amqp_available()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI=true but {reason}")
        pytest.skip(reason)
    return AMQP_URL
