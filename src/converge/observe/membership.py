"""Which resource types this observer samples, among the live observers of one database.

A process serving the ``observer`` role keeps a service row naming it (the engine's row and
heartbeat, ``converge.engine.runtime``). The types are divided among the live observers by
rendezvous hashing (``core.shard``): each type has one owner, and when an observer joins or
dies only its own share moves. A survivor that gains a type samples it fully at once, which
covers whatever changed while the dead one's share was not watched; while two observers
briefly both sample a type (one has not seen the other join yet), the baseline's
compare-and-swap still publishes each change once.

A synchronizer without such a row (``observer_id`` None: a handle without the role, a
test) is invisible to the others, so it samples every type: dividing would leave its share
to nobody.
"""

from __future__ import annotations

import logging

from converge.core import shard
from converge.engine import liveness
from converge.engine.settings import EngineSettings
from converge.errors import ConvergeError
from converge.ports import Clock, Store

log = logging.getLogger("converge.observe")

ROLE = "observer"


class Membership:
    """The live observers as last seen, and whether a type is this observer's."""

    def __init__(
        self, store: Store, clock: Clock, settings: EngineSettings, observer_id: str | None
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self.observer_id = observer_id
        self.observers: frozenset[str] = frozenset(() if observer_id is None else {observer_id})

    def owns(self, type_name: str) -> bool:
        """Whether this observer samples ``type_name`` (as of the last refresh)."""
        if self.observer_id is None:
            return True
        return shard.owner(type_name, self.observers) == self.observer_id

    async def refresh(self) -> None:
        """Read who else is alive."""
        if self.observer_id is None:
            return
        alive = await liveness.live_services(
            self._store,
            self.observer_id,
            self._clock.now(),
            self._settings.engine_stale_after,
            host=self._settings.host,
        )
        observers = frozenset({self.observer_id, *(s.engine_id for s in alive if ROLE in s.roles)})
        if observers != self.observers:
            log.info("observers changed", extra={"observers": len(observers)})
        self.observers = observers

    async def follow(self) -> None:
        """Refresh every heartbeat interval until cancelled; a failure is retried."""
        while True:
            try:
                await self.refresh()
            except ConvergeError as exc:
                log.warning("observers not read", extra={"error": str(exc)})
            await self._clock.sleep(self._settings.heartbeat_interval)
