"""Running one plugin call for a resource: under the operation's deadline and the action
timeout, with the plugin error contract mapped (retry later, replacement required,
permanent failure, timeout, a plugin's bug), and the ``ResourceContext`` a plugin is given."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from converge.engine.failure import ActionFailed
from converge.engine.worker.base import WorkerBase
from converge.errors import PermanentFailure, ReplacementRequired, RetryLater
from converge.records import ResourceRecord, StackRecord
from converge.resources.base import ResourceContext

log = logging.getLogger("converge.engine.worker")

T = TypeVar("T")


class PluginCallsMixin(WorkerBase):
    """How the worker calls a resource's plugin."""

    async def _run(
        self,
        stack: StackRecord,
        row: ResourceRecord,
        call: Callable[..., Awaitable[T]],
        *args: Any,
    ) -> T:
        """Run one plugin call under the deadline, mapping the plugin error contract."""
        while True:
            try:
                async with asyncio.timeout(self._time_left(stack)):
                    return await call(*args)
            except ReplacementRequired as exc:
                raise _Replace(str(exc) or "the plugin requires replacement") from exc
            except RetryLater as exc:
                left = self._time_left(stack)
                if left is not None and left <= exc.delay:
                    raise ActionFailed(
                        f"Error: resources.{row.name}: {exc} (no time left to retry)"
                    ) from exc
                await self.ctx.clock.sleep(exc.delay)
            except PermanentFailure as exc:
                raise ActionFailed(exc.reason(row.name)) from exc
            except TimeoutError as exc:
                raise ActionFailed(f"Error: resources.{row.name}: Timed out") from exc
            except Exception as exc:
                log.exception("plugin bug", extra={"resource": row.name, "type": row.type})
                raise ActionFailed(f"{type(exc).__name__}: resources.{row.name}: {exc}") from exc

    def _time_left(self, stack: StackRecord) -> float | None:
        limits = []
        if stack.deadline is not None:
            limits.append(stack.deadline - self.ctx.clock.now())
        if self.ctx.settings.action_timeout is not None:
            limits.append(self.ctx.settings.action_timeout)
        return max(0.0, min(limits)) if limits else None

    def _context(self, stack: StackRecord, row: ResourceRecord) -> ResourceContext:
        short = hashlib.sha256(f"{stack.id}:{row.id}".encode()).hexdigest()[:8]
        deadline = None
        left = self._time_left(stack)
        if left is not None:
            deadline = self.ctx.clock.now() + left
        return ResourceContext(
            stack_id=stack.id,
            stack_name=stack.name,
            resource_name=row.name,
            physical_name=f"{stack.name}-{row.name}-{short}",
            clock=self.ctx.clock,
            deadline=deadline,
            logger=logging.LoggerAdapter(
                logging.getLogger("converge.resource"), {"stack": stack.name, "resource": row.name}
            ),
            allowed_roots=self.ctx.settings.allowed_roots,
            settings=self.ctx.settings.plugin_settings,
            nested=self.nested,
            converge=stack.converge,
        )


class _Replace(Exception):
    pass
