"""What the REST API watches, limited to a project: the change feed of its stacks' events
and the synchronizer's snapshot of a type (both read through the SQL store directly)."""

from __future__ import annotations

from converge.adapters.sql.feed import EventFeed, FeedReader
from converge.api.base import ConvergeBase
from converge.core.baseline import Snapshot


class FeedMixin(ConvergeBase):
    """A project's change feed and snapshots."""

    async def snapshot(self, type_name: str) -> Snapshot:
        """The synchronizer's ``get_all`` of a type, limited to this project's stacks."""
        from converge.adapters.sql.entities import EntityStore

        snapshot = await EntityStore(self._sql()).snapshot(type_name)
        mine = {stack.id for stack in await self._store.list_stacks(self.project_id)}
        return Snapshot(
            [entity for entity in snapshot.entities if entity.stack_id in mine],
            dict(snapshot.seqs),
        )

    def event_reader(self, after_id: int, *, stack_id: str | None = None) -> FeedReader:
        """The project's change feed from ``after_id`` on (of one stack, if given): each
        ``await reader.next()`` gives the events of its stacks since the last, oldest
        first, none missed even when several processes write events at once."""
        return EventFeed(self._sql()).reader(self.project_id, after_id, stack_id=stack_id)

    async def last_event_id(self) -> int:
        return await EventFeed(self._sql()).last_id()
