"""The consumer flow done right: subscribe, then get all, then apply only what is newer.

Opening the subscription before reading the snapshot means nothing published after the
read began is lost; applying only notifications numbered above the snapshot's sequence (and
above the last one applied to that entity) means nothing in the snapshot is applied again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import NoReturn, Protocol

from converge.core.baseline import Snapshot
from converge.messages import ChangeNotification
from converge.observe.hub import Subscription

ApplySnapshot = Callable[[Snapshot], Awaitable[None]]
ApplyChange = Callable[[ChangeNotification], Awaitable[None]]


class Source(Protocol):
    """What ``consume`` needs of a synchronizer."""

    def subscribe(self, type_name: str | None = None) -> Subscription: ...

    async def get_all(self, type_name: str | None = None) -> Snapshot: ...


class ChangeFilter:
    """Decides which notifications a consumer holding a snapshot must still apply."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        # Per entity, the last sequence applied: two samplers' notifications may arrive out
        # of order, and an older one must not undo a newer one.
        self._applied: dict[tuple[str, str], int] = {}

    def is_new(self, notification: ChangeNotification) -> bool:
        """True once per change newer than the snapshot (then remembered)."""
        key = (notification.type, notification.physical_id)
        floor = max(self._snapshot.seq_of(notification.type), self._applied.get(key, 0))
        if notification.seq <= floor:
            return False
        self._applied[key] = notification.seq
        return True


async def consume(
    sync: Source,
    type_name: str | None,
    apply_snapshot: ApplySnapshot,
    apply_change: ApplyChange,
) -> NoReturn:
    """Keep a consumer's view of a type (or all types) current, until cancelled.

    ``apply_snapshot`` gets the full snapshot once; ``apply_change`` then gets every later
    change exactly once, in the order received.
    """
    async with sync.subscribe(type_name) as subscription:
        snapshot = await sync.get_all(type_name)
        await apply_snapshot(snapshot)
        changes = ChangeFilter(snapshot)
        async for notification in subscription:
            if changes.is_new(notification):
                await apply_change(notification)
    raise RuntimeError("the synchronizer stopped: its subscriptions ended")
