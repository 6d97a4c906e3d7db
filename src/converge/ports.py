"""The ports between the engine and its adapters: the bus and the clock.

The store port is ``converge.adapters.sql.store.SqlStore``'s public coroutine surface (one
implementation serves SQLite and PostgreSQL through SQLAlchemy); its records live in
``converge.records``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol

from converge.resources.base import Clock

__all__ = ["Bus", "Clock", "WorkHandler"]

WorkHandler = Callable[[dict[str, Any]], Awaitable[None]]


class Bus(Protocol):
    """Sends work to workers and change notifications to subscribers."""

    async def start(self, work_handler: WorkHandler) -> None:
        """Begin delivering work messages to ``work_handler``."""

    async def send_work(self, message: dict[str, Any]) -> None:
        """Queue a work message for some worker (any process holding the worker role)."""

    async def publish(self, topic: str, message: dict[str, Any]) -> None:
        """Deliver a notification to every current subscriber of ``topic``."""

    def subscribe(self, topic: str) -> AsyncIterator[dict[str, Any]]:
        """Notifications on ``topic`` from now on."""

    async def close(self) -> None: ...
