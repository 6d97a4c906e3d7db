"""How a handle is opened: embedded (a SQLite file) or over a database URL, with the
in-process bus or a broker; how it serves the synchronizer and drift handling
(``converge serve``); and what it says of the state and the processes sharing it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Self

from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.store import SqlStore
from converge.api.base import ConvergeBase
from converge.api.buses import _bus
from converge.engine import liveness
from converge.engine.operations import SETTLED_TOPIC
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.errors import StateError, Unavailable
from converge.ports import Bus
from converge.records import ServiceRecord
from converge.resources.builtin import world
from converge.resources.registry import PluginRegistry

log = logging.getLogger("converge.api")


class OpeningMixin(ConvergeBase):
    """Opening a handle, serving with it, and the health of what it runs over."""

    @classmethod
    @asynccontextmanager
    async def embedded(
        cls,
        state: str | Path = "converge.db",
        *,
        settings: EngineSettings | None = None,
        registry: PluginRegistry | None = None,
        read_only: bool = False,
        broker_url: str | None = None,
        broker_namespace: str = "converge",
        roles: Collection[str] = ("engine", "worker"),
    ) -> AsyncIterator[Self]:
        """The embedded default: a SQLite file and an in-process bus (or RabbitMQ at
        ``broker_url``, for several processes of one host sharing the file; ``roles`` as
        for ``open``).

        A missing file is a new state (made 0600). ``read_only=True`` only reads: no
        engine runs (no service row, heartbeat or migration), the file may be read-only,
        and a missing one is ``NotFound``; reading calls (get, list, events, outputs) work.

        The built-in test types keep their simulated reality (the test world) beside the
        state file unless ``settings.plugin_settings["test_world"]`` names another file.
        """
        settings = settings or EngineSettings()
        if world.SETTING not in settings.plugin_settings:
            plugin_settings = {
                **settings.plugin_settings,
                world.SETTING: str(world.world_path_for(state)),
            }
            settings = dataclasses.replace(settings, plugin_settings=plugin_settings)
        bus = _bus(broker_url, broker_namespace, roles, read_only=read_only, settings=settings)
        store = SqlStore.open_file(state, read_only=read_only)
        async with cls._over(
            store, settings, registry, start=not read_only, bus=bus, roles=roles
        ) as cv:
            yield cv

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        database_url: str,
        *,
        settings: EngineSettings | None = None,
        registry: PluginRegistry | None = None,
        broker_url: str | None = None,
        broker_namespace: str = "converge",
        roles: Collection[str] = ("engine", "worker"),
        read_only: bool = False,
    ) -> AsyncIterator[Self]:
        """An engine over the database at ``database_url`` (SQLite or PostgreSQL) and the
        in-process bus, or RabbitMQ at ``broker_url`` (``amqp://…``): every process opened
        with the same database, broker and namespace shares the work.

        ``roles`` are the engine's (``converge.engine.runtime.ROLES``): with a broker, a
        handle that only starts operations and follows them passes ``()`` and leaves the
        checks to the worker processes. ``read_only=True`` runs no engine at all (reading
        calls only), as for ``embedded``.
        """
        bus = _bus(
            broker_url,
            broker_namespace,
            roles,
            read_only=read_only,
            settings=settings or EngineSettings(),
        )
        store = SqlStore.open(database_url)
        async with cls._over(
            store, settings, registry, start=not read_only, bus=bus, roles=roles
        ) as cv:
            yield cv

    @classmethod
    @asynccontextmanager
    async def _over(
        cls,
        store: SqlStore,
        settings: EngineSettings | None,
        registry: PluginRegistry | None,
        *,
        start: bool,
        bus: Bus | None = None,
        roles: Collection[str] = ("engine", "worker"),
    ) -> AsyncIterator[Self]:
        engine = Engine(store, bus or LocalBus(), registry=registry, settings=settings, roles=roles)
        try:
            if start:
                await engine.start()
            yield cls(engine)
        finally:
            try:
                await engine.stop()
            finally:
                await store.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Any]:
        """Run the synchronizer and drift handling with this engine (``converge serve``).

        The engine consumes the synchronizer's snapshot and change notifications; each
        stack's drift policy says what happens to drift. Yields the ``Synchronizer``.
        """
        from converge.observe import Synchronizer

        sync = Synchronizer(
            self._store,
            self._ctx.bus,
            self._ctx.registry,
            self._ctx.clock,
            self._ctx.settings,
            # Seen by the other observers by this engine's row: they divide the types.
            observer_id=self.engine.engine_id if "observer" in self.engine.roles else None,
        )
        await sync.start()
        tasks = [
            self.engine.handle_drift(),
            asyncio.create_task(self._consume(sync), name="converge-drift-consumer"),
            asyncio.create_task(self._resample_settled(sync), name="converge-resample"),
        ]
        try:
            yield sync
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await sync.stop()

    async def _resample_settled(self, sync: Any) -> None:
        """Sample a stack's types as soon as one of its operations settles (the types this
        observer samples: every observer hears of it)."""
        subscription = await self._ctx.bus.subscribe(SETTLED_TOPIC)
        try:
            async for message in subscription:
                for type_name in message.get("types", []):
                    if not sync.membership.owns(type_name):
                        continue
                    try:
                        await sync.sample_once(type_name)
                    except Exception:
                        log.exception("resampling %s after a settled operation failed", type_name)
        finally:
            await subscription.close()

    async def _consume(self, sync: Any) -> None:
        """Consume notifications for good: a failure is logged and the consumer restarts."""
        from converge.observe import consume

        handler = self.engine.drift
        while True:
            try:
                await consume(sync, None, handler.apply_snapshot, handler.apply_change)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("drift consumer failed; restarting it")
                await asyncio.sleep(self._ctx.settings.drift_recheck_interval)

    def raise_if_state_failed(self) -> None:
        """Raise the ``StateError`` that made the store unusable, if one did (a damaged or
        full state: every later store call fails the same way, so a long run stops)."""
        failure = self._store.failure
        if failure is not None:
            raise StateError(failure.location, failure.reason)

    async def reach_broker(self) -> None:
        """Connect to the broker now (nothing to do without one): ``Unavailable``, naming
        it, if it cannot be reached. A command over a broker asks before it starts work."""
        await self._ctx.bus.connect()

    async def require_workers(self) -> None:
        """``Unavailable`` when an operation started here would wait for a worker that does
        not exist: this process has no worker role and no live process has it (an API
        served by ``converge serve --roles engine`` while every worker is down). Nothing
        is started then, as the CLI refuses over a broker."""
        if "worker" in self.engine.roles:
            return
        if not await self.live_services("worker"):
            raise Unavailable(
                "no converge worker is alive: nothing would do the work, so nothing was "
                "started. Start one (`converge serve`, or `converge serve --roles worker`) "
                "over the same state and broker, and try again"
            )

    async def live_services(self, role: str | None = None) -> list[ServiceRecord]:
        """The processes sharing this state that are alive (their heartbeat is fresher than
        ``engine_stale_after``, and on this host their process still runs), with ``role``
        if given: a CLI over a broker asks whether any worker will do its work."""
        since = self._ctx.clock.now() - self._ctx.settings.engine_stale_after
        host = self._ctx.host
        return [
            service
            for service in await self._store.list_services()
            if service.heartbeat_at > since
            and not liveness.is_dead_here(service, host)
            and (role is None or role in service.roles)
        ]
