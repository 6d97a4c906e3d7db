"""Which resource types this observer samples, among the live observers of one database.

Every synchronizer keeps a service row with the role ``observer`` and a heartbeat. The
types are divided among the live observers by rendezvous hashing (``core.shard``): each
type has one owner, and when an observer joins or dies only its own share moves. A
survivor that gains a type samples it fully at once, which covers whatever changed while
the dead one's share was not watched; while two observers briefly both sample a type (one
has not seen the other join yet), the baseline's compare-and-swap still publishes each
change once.
"""

from __future__ import annotations

import logging
import os
import uuid

from converge.core import shard
from converge.engine import liveness
from converge.engine.settings import EngineSettings
from converge.errors import ConvergeError
from converge.ports import Clock, Store
from converge.records import ServiceRecord

log = logging.getLogger("converge.observe")

ROLE = "observer"


class Membership:
    """This observer's row, its heartbeat, and the live observers as last seen."""

    def __init__(
        self, store: Store, clock: Clock, settings: EngineSettings, observer_id: str | None = None
    ) -> None:
        self._store = store
        self._clock = clock
        self._settings = settings
        self.observer_id = observer_id or str(uuid.uuid4())
        self.observers: frozenset[str] = frozenset({self.observer_id})

    def owns(self, type_name: str) -> bool:
        """Whether this observer samples ``type_name`` (as of the last refresh)."""
        return shard.owner(type_name, self.observers) == self.observer_id

    async def join(self) -> None:
        now = self._clock.now()
        await self._store.register_service(
            ServiceRecord(
                engine_id=self.observer_id,
                host=liveness.host_name(),
                pid=os.getpid(),
                roles=(ROLE,),
                started_at=now,
                heartbeat_at=now,
                process_start=liveness.process_start(os.getpid()),
            )
        )
        await self.refresh()

    async def refresh(self) -> None:
        """Beat, and read who else is alive."""
        now = self._clock.now()
        await self._store.heartbeat(self.observer_id, now)
        alive = await liveness.live_services(
            self._store, self.observer_id, now, self._settings.engine_stale_after
        )
        observers = frozenset({self.observer_id, *(s.engine_id for s in alive if ROLE in s.roles)})
        if observers != self.observers:
            log.info("observers changed", extra={"observers": len(observers)})
        self.observers = observers

    async def beat(self) -> None:
        """Refresh every heartbeat interval until cancelled; a failure is retried."""
        while True:
            await self._clock.sleep(self._settings.heartbeat_interval)
            try:
                await self.refresh()
            except ConvergeError as exc:
                log.warning("observer heartbeat failed", extra={"error": str(exc)})

    async def leave(self) -> None:
        try:
            await self._store.remove_service(self.observer_id)
        except ConvergeError as exc:  # its heartbeat goes stale instead
            log.warning("observer row not removed", extra={"error": str(exc)})
