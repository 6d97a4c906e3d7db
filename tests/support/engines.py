"""Engines in this process: one over a store URL and a bus; two over one PostgreSQL
database and one RabbitMQ namespace."""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from converge.adapters.sql.store import SqlStore
from converge.api import Converge
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.ports import Bus
from converge.resources.builtin import world
from converge.resources.registry import PluginRegistry
from support import hanging
from support.amqp import delete_namespace


@contextlib.asynccontextmanager
async def running_engine(
    url: str,
    registry: PluginRegistry,
    bus: Bus,
    settings: EngineSettings | None = None,
    roles: tuple[str, ...] = ("engine", "worker"),
) -> AsyncIterator[Engine]:
    """An engine over the store at ``url``, started, stopped and closed after."""
    store = SqlStore.open(url)
    engine = Engine(store, bus, registry=registry, settings=settings, roles=roles)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()
        await store.close()


@contextlib.asynccontextmanager
async def two_engines(
    postgres_url: str,
    rabbitmq_url: str,
    settings: EngineSettings,
    second_settings: EngineSettings | None = None,
    roles: tuple[str, ...] = ("engine", "worker"),
    second_roles: tuple[str, ...] | None = None,
) -> AsyncIterator[tuple[Converge, Converge, str]]:
    namespace = f"converge-test-{uuid.uuid4().hex[:10]}"

    def engine(
        settings: EngineSettings, roles: tuple[str, ...]
    ) -> contextlib.AbstractAsyncContextManager[Converge]:
        return Converge.open(
            postgres_url,
            settings=settings,
            registry=hanging.registry(),
            broker_url=rabbitmq_url,
            broker_namespace=namespace,
            roles=roles,
        )

    hosts = {socket.gethostname(), *(s.host for s in (settings, second_settings) if s and s.host)}
    try:
        async with (
            engine(settings, roles) as first,
            engine(second_settings or settings, second_roles or roles) as second,
        ):
            yield first, second, namespace
    finally:
        await delete_namespace(rabbitmq_url, namespace, hosts=tuple(sorted(hosts)))


def fast(tmp_path: Path, **changes: Any) -> EngineSettings:
    settings = EngineSettings(
        sweep_interval=0.1,
        heartbeat_interval=0.2,
        plugin_settings={world.SETTING: str(tmp_path / "world.db")},
    )
    return dataclasses.replace(settings, **changes)
