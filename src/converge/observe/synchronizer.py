"""The synchronizer: a sampler per resource type, the baseline, and its northbound face.

Southbound, each sampler keeps its type's baseline current and publishes a change
notification (topic ``entity.<type>``) for every entity that appeared, changed or went.
Northbound, a consumer gets all entities of a type with the sequence number they are
consistent with, and subscribes to notifications; ``converge.observe.consumer.consume``
puts the two together without losing or repeating a change.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import defaultdict

from converge.core.baseline import ManagedEntity, Snapshot
from converge.engine.settings import EngineSettings
from converge.errors import NotFound
from converge.messages import ChangeNotification
from converge.observe.hub import NotificationHub, Subscription
from converge.observe.membership import Membership
from converge.observe.sampler import Sampler, SamplerStatus
from converge.ports import Bus, Clock, Store
from converge.resources.registry import PluginRegistry

log = logging.getLogger("converge.observe")


class Synchronizer:
    """Samplers for every type of ``registry`` over one store and bus."""

    def __init__(
        self,
        store: Store,
        bus: Bus,
        registry: PluginRegistry,
        clock: Clock,
        settings: EngineSettings | None = None,
        *,
        observer_id: str | None = None,
    ) -> None:
        """``observer_id``: the service row (with the ``observer`` role) that other
        observers see this one by; with it the types are divided among the live observers,
        without it this synchronizer samples them all."""
        self._bus = bus
        self._clock = clock
        self._settings = settings or EngineSettings()
        self.entities = store.entities
        self._hub = NotificationHub(bus)
        # The types are divided among the live observers of the database.
        self.membership = Membership(store, clock, self._settings, observer_id)
        self._samplers = {
            name: Sampler(
                name,
                registry.plugin(name),
                self.entities,
                self._publish,
                clock,
                self._settings,
                is_mine=functools.partial(self.membership.owns, name),
            )
            for name in registry.type_names()
        }
        self._tasks: list[asyncio.Task[None]] = []

    # --- lifecycle -----------------------------------------------------------------------

    async def start(self) -> None:
        """Join the live observers and run the samplers of this one's share of the types
        in the background until ``stop``."""
        if self._tasks:
            return
        await self.membership.refresh()
        self._tasks = [
            asyncio.create_task(self.membership.follow(), name="converge-observers"),
            *(sampler.start() for sampler in self._samplers.values()),
        ]

    async def stop(self) -> None:
        """Stop the samplers and their watches; open subscriptions end."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._hub.close()

    async def __aenter__(self) -> Synchronizer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- sampling ------------------------------------------------------------------------

    async def sample_once(self, type_name: str | None = None) -> list[ChangeNotification]:
        """A full pass now, of one type or all, in parallel; the notifications published.

        A sampler that fails (a plugin hanging past the timeout, a plugin bug) is reported
        in ``status()`` and the log; the others complete regardless.
        """
        samplers = list(self._samplers.values())
        if type_name is not None:
            samplers = [self.sampler(type_name)]
        managed: dict[str, list[ManagedEntity]] = defaultdict(list)
        for entity in await self.entities.managed([s.type_name for s in samplers]):
            managed[entity.type].append(entity)
        results = await asyncio.gather(
            *(sampler.sample(None, managed[sampler.type_name]) for sampler in samplers),
            return_exceptions=True,
        )
        published: list[ChangeNotification] = []
        for result in results:
            if isinstance(result, asyncio.CancelledError):
                raise result
            if isinstance(result, list):
                published.extend(result)
        return published

    def sampler(self, type_name: str) -> Sampler:
        try:
            return self._samplers[type_name]
        except KeyError:
            known = ", ".join(sorted(self._samplers))
            raise NotFound(f"no sampler for resource type {type_name!r}; known: {known}") from None

    async def _publish(self, notifications: list[ChangeNotification]) -> None:
        for notification in sorted(notifications, key=lambda n: n.seq):
            await self._bus.publish(
                ChangeNotification.topic(notification.type), notification.to_dict()
            )

    # --- northbound ----------------------------------------------------------------------

    async def get_all(self, type_name: str | None = None) -> Snapshot:
        """Every entity of a type (or all), managed or not, with its sequence numbers."""
        return await self.entities.snapshot(type_name)

    def subscribe(self, type_name: str | None = None) -> Subscription:
        """Notifications of a type (or all) published after the subscription is opened.

        Open it (``async with``, ``await sub.open()``, or the first ``__anext__``) before
        reading a snapshot; ``consume`` does it in the right order.
        """
        return Subscription(self._hub, type_name)

    def status(self) -> dict[str, SamplerStatus]:
        """Heartbeat, progress and stall of every sampler, by type."""
        return {name: sampler.status() for name, sampler in self._samplers.items()}
