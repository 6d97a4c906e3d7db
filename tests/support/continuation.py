"""An engine of the acceptance tests of local continuation (a check continued by the worker
whose finish made it ready): a bus that counts what goes through it, the engine, and the
order things were made in."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

from converge.adapters.local_bus import LocalBus
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.resources.registry import PluginRegistry
from support.engines import running_engine
from support.world import Reality


class CountingBus(LocalBus):
    """The in-process bus, counting the work messages sent through it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[dict[str, Any]] = []

    async def send_work(self, message: dict[str, Any], *, host: str | None = None) -> None:
        self.sent.append(message)
        await super().send_work(message, host=host)


def running(
    url: str, registry: PluginRegistry, bus: LocalBus, **settings: Any
) -> AbstractAsyncContextManager[Engine]:
    return running_engine(url, registry, bus, EngineSettings(**settings))


def names(reality: Reality) -> list[str]:
    return [name for _, name, _ in reality.log]
