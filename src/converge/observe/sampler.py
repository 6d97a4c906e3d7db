"""A sampler: keeps the baseline of one resource type up to date with reality.

A full pass takes a snapshot (``list_all``) where the type can, else observes each managed
entity; between passes, a type that can push (``watch``) hands over hints and only the
hinted entities are observed. Every plugin call runs under a timeout on the injected clock,
so a hanging plugin stalls one pass of one sampler, is reported, and nothing else waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import Awaitable, Callable, Collection, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from converge.core.baseline import ManagedEntity, Observation, Owner, observation
from converge.engine.settings import EngineSettings
from converge.errors import PluginError
from converge.messages import ChangeNotification
from converge.ports import BaselineStore, Clock
from converge.resources.base import (
    AppliedState,
    ObserverContext,
    ResourceContext,
    ResourcePlugin,
)

log = logging.getLogger("converge.observe")

T = TypeVar("T")

Publish = Callable[[list[ChangeNotification]], Awaitable[None]]


class SamplerStalled(PluginError):
    """A plugin call of a sampler did not finish within the observe timeout."""


@dataclass(frozen=True)
class SamplerStatus:
    """Progress of one sampler, for ``Synchronizer.status()``."""

    type_name: str
    mode: str  # "snapshot" (list_all) or "observe" (each managed entity)
    interval: float
    pushing: bool  # a watch is running
    passes: int
    failures: int
    heartbeat: float | None  # last sign of life: a pass began or ended, or the loop woke
    last_pass_started: float | None
    last_pass_finished: float | None
    entities: int  # entities seen in the last pass
    last_error: str | None  # of the last pass (None: it went well)
    stalled: bool  # a plugin call hung past the timeout, or a pass has run too long

    @property
    def is_healthy(self) -> bool:
        return not self.stalled and self.last_error is None


class Sampler:
    """Samples one type; ``sample`` is one pass, ``run`` the loop around it."""

    def __init__(
        self,
        type_name: str,
        plugin: ResourcePlugin,
        entities: BaselineStore,
        publish: Publish,
        clock: Clock,
        settings: EngineSettings,
        is_mine: Callable[[], bool] = lambda: True,
    ) -> None:
        self.type_name = type_name
        # Whether this observer samples the type now (``observe.membership``): the loop
        # idles while another observer owns it.
        self._is_mine = is_mine
        self.plugin = plugin
        self._entities = entities
        self._publish = publish
        self._clock = clock
        self._settings = settings
        self.interval = settings.observe_intervals.get(type_name, settings.observe_interval)
        self._timeout = settings.observe_timeout
        self._limit = asyncio.Semaphore(max(1, settings.observe_concurrency))
        self._logger = logging.LoggerAdapter(log, {"type": type_name})
        self._hints: set[str] = set()
        self._hinted = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None
        self._watched: frozenset[str] | None = None
        self._passes = 0
        self._failures = 0
        self._heartbeat: float | None = None
        self._started: float | None = None
        self._finished: float | None = None
        self._running = False
        self._entity_count = 0
        self._error: str | None = None
        self._stalled = False
        self._loop_task: asyncio.Task[None] | None = None

    @property
    def can_snapshot(self) -> bool:
        return callable(getattr(self.plugin, "list_all", None))

    @property
    def watched(self) -> frozenset[str]:
        """Physical ids the running watch covers (empty when none runs)."""
        if self._watch is None or self._watch.done():
            return frozenset()
        return self._watched or frozenset()

    @property
    def can_watch(self) -> bool:
        return callable(getattr(self.plugin, "watch", None))

    # --- one pass ------------------------------------------------------------------------

    async def sample(
        self,
        hinted: Collection[str] | None = None,
        managed: list[ManagedEntity] | None = None,
    ) -> list[ChangeNotification]:
        """One pass: everything (``hinted`` None), or just the hinted entities.

        Returns the notifications it published. A failure is recorded in the status and
        logged, then raised.
        """
        started = self._clock.now()
        self._started, self._heartbeat, self._running = started, started, True
        try:
            notifications, problem = await self._sample(started, hinted, managed)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failed(str(exc) if isinstance(exc, PluginError) else _describe(exc), exc)
            raise
        finally:
            self._running = False
            self._finished = self._heartbeat = self._clock.now()
        self._passes += 1
        if problem is not None:
            self._failed(problem, None)  # the rest of the pass counted
        else:
            self._error, self._stalled = None, False
        return notifications

    def _failed(self, error: str, exc: Exception | None) -> None:
        self._failures += 1
        self._error = error
        self._stalled = isinstance(exc, SamplerStalled) or "did not finish within" in error
        self._logger.warning("sampling %s failed: %s", self.type_name, error)

    async def _sample(
        self,
        started: float,
        hinted: Collection[str] | None,
        managed: list[ManagedEntity] | None,
    ) -> tuple[list[ChangeNotification], str | None]:
        if managed is None:
            managed = await self._entities.managed([self.type_name])
        by_id = {entity.physical_id: entity for entity in managed}
        self._restart_watch(by_id)
        if hinted is not None and self.can_snapshot and any(p not in by_id for p in hinted):
            hinted = None  # an unmanaged entity can only be read through a snapshot
        if hinted is None:
            self._hints.clear()
        problem = None
        if hinted is None and self.can_snapshot:
            observed = await self._snapshot(by_id)
            self._entity_count = len(observed)
            notifications = await self._entities.reconcile(
                self.type_name, observed, complete=True, observed_at=started, now=self._now()
            )
        else:
            targets = list(managed) if hinted is None else [by_id[p] for p in hinted if p in by_id]
            observed, gone, unknown, problems = await self._observe_each(targets)
            self._entity_count = len(observed)
            notifications = await self._entities.reconcile(
                self.type_name,
                observed,
                complete=hinted is None,
                gone=gone,
                unknown=unknown,
                observed_at=started,
                now=self._now(),
            )
            if problems:
                problem = str(problems[0])
                if len(problems) > 1:
                    problem = f"{len(problems)} of {len(targets)} observations failed: {problem}"
        await self._publish(notifications)
        return notifications, problem

    async def _snapshot(self, by_id: Mapping[str, ManagedEntity]) -> dict[str, Observation]:
        live = await self._bounded(self.plugin.list_all(self._observer_context()), "list_all")  # type: ignore[attr-defined]
        owners = {pid: entity.owner for pid, entity in by_id.items()}
        # Hashing a large snapshot is CPU work: keep the event loop free meanwhile.
        return await asyncio.to_thread(_observations, self.plugin, live, owners)

    async def _observe_each(
        self, targets: list[ManagedEntity]
    ) -> tuple[dict[str, Observation], set[str], set[str], list[Exception]]:
        observed: dict[str, Observation] = {}
        gone: set[str] = set()
        unknown: set[str] = set()
        problems: list[Exception] = []

        async def one(entity: ManagedEntity) -> None:
            async with self._limit:
                try:
                    live = await self._bounded(
                        self.plugin.observe(self._resource_context(entity), _applied(entity)),
                        f"observe of {entity.physical_id}",
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    unknown.add(entity.physical_id)
                    problems.append(exc if isinstance(exc, PluginError) else _plugin_bug(exc))
                    return
            if live is None:
                gone.add(entity.physical_id)
            else:
                observed[entity.physical_id] = observation(self.plugin.essence(live), entity.owner)

        await asyncio.gather(*(one(entity) for entity in targets))
        return observed, gone, unknown, problems

    async def _bounded(self, call: Coroutine[Any, Any, T] | Awaitable[T], what: str) -> T:
        """Await a plugin call, giving up after the timeout measured on the injected clock."""
        task: asyncio.Future[T] = asyncio.ensure_future(call)
        timer: asyncio.Future[Any] = asyncio.ensure_future(self._clock.sleep(self._timeout))
        waiting: set[asyncio.Future[Any]] = {task, timer}
        try:
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        finally:
            timer.cancel()
            if not task.done():
                task.cancel()
                task.add_done_callback(_retrieve)
        if task in done:
            return task.result()
        # Give the cancelled call a moment to unwind; a call stuck in a thread is left.
        await asyncio.wait({task}, timeout=1.0)
        raise SamplerStalled(
            f"{self.type_name}: {what} did not finish within {self._timeout:g} s (plugin hanging?)"
        )

    # --- the loop ------------------------------------------------------------------------

    def hint(self, physical_id: str) -> None:
        """Reality of ``physical_id`` may have changed: observe it soon."""
        self._hints.add(physical_id)
        self._hinted.set()

    async def run(self) -> None:
        """Sample every ``interval``, and the hinted entities in between, until cancelled.

        While another observer owns the type, the loop only looks every heartbeat interval
        whether it still does; a type gained is sampled fully at once.
        """
        next_full = self._clock.now()
        try:
            while True:
                self._heartbeat = now = self._clock.now()
                if not self._is_mine():
                    await self.stop_watch()
                    self._hints.clear()
                    self._hinted.clear()
                    next_full = now
                    await self._clock.sleep(self._settings.heartbeat_interval)
                    continue
                if now >= next_full:
                    next_full = now + self.interval
                    await self._quietly(None)
                elif self._hints:
                    hinted, self._hints = self._hints, set()
                    await self._quietly(hinted)
                if not self._hints:
                    self._hinted.clear()
                await self._wait(next_full - self._clock.now())
        finally:
            await self.stop_watch()

    async def _quietly(self, hinted: Collection[str] | None) -> None:
        with contextlib.suppress(Exception):  # recorded and logged by ``sample``
            await self.sample(hinted)

    async def _wait(self, seconds: float) -> None:
        if seconds <= 0 or self._hinted.is_set():
            return
        sleeper: asyncio.Future[Any] = asyncio.ensure_future(self._clock.sleep(seconds))
        hinted: asyncio.Future[Any] = asyncio.ensure_future(self._hinted.wait())
        try:
            await asyncio.wait({sleeper, hinted}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            hinted.cancel()

    def _restart_watch(self, by_id: Mapping[str, ManagedEntity]) -> None:
        """(Re)start the watch when the managed set changed or the last one ended."""
        if not self.can_watch or not self._running_loop():
            return
        managed = frozenset(by_id)
        if self._watch is not None and not self._watch.done() and self._watched == managed:
            return
        if self._watch is not None:
            self._watch.cancel()
        self._watched = managed
        applied = {pid: _applied(entity) for pid, entity in by_id.items()}
        self._watch = asyncio.create_task(
            self._consume_watch(applied), name=f"converge-watch-{self.type_name}"
        )

    def _running_loop(self) -> bool:
        # Watches run only under ``run``: a lone ``sample`` must not leave tasks behind.
        return self._loop_task is not None and not self._loop_task.done()

    def start(self) -> asyncio.Task[None]:
        """Run the loop in a task of its own (cancel it to stop)."""
        self._loop_task = asyncio.create_task(self.run(), name=f"converge-sampler-{self.type_name}")
        return self._loop_task

    async def _consume_watch(self, applied: Mapping[str, AppliedState]) -> None:
        try:
            async for physical_id in self.plugin.watch(self._observer_context(), applied):  # type: ignore[attr-defined]
                self.hint(str(physical_id))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._logger.warning(
                "watch of %s failed (polling continues): %s", self.type_name, exc, exc_info=True
            )

    async def stop_watch(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await watch

    # --- status --------------------------------------------------------------------------

    def status(self) -> SamplerStatus:
        now = self._clock.now()
        overdue = (
            self._running and self._started is not None and now - self._started > 2 * self._timeout
        )
        return SamplerStatus(
            type_name=self.type_name,
            mode="snapshot" if self.can_snapshot else "observe",
            interval=self.interval,
            pushing=self._watch is not None and not self._watch.done(),
            passes=self._passes,
            failures=self._failures,
            heartbeat=self._heartbeat,
            last_pass_started=self._started,
            last_pass_finished=self._finished,
            entities=self._entity_count,
            last_error=self._error,
            stalled=self._stalled or overdue,
        )

    # --- contexts ------------------------------------------------------------------------

    def _now(self) -> float:
        return self._clock.now()

    def _observer_context(self) -> ObserverContext:
        return ObserverContext(
            clock=self._clock,
            logger=self._logger,
            allowed_roots=self._settings.allowed_roots,
            settings=self._settings.plugin_settings,
        )

    def _resource_context(self, entity: ManagedEntity) -> ResourceContext:
        # Built as the worker builds it, so a plugin finds what it made under the same name.
        owner = entity.owner
        short = hashlib.sha256(f"{owner.stack_id}:{owner.resource_id}".encode()).hexdigest()[:8]
        return ResourceContext(
            stack_id=owner.stack_id,
            stack_name=entity.stack_name,
            resource_name=owner.resource_name,
            physical_name=f"{entity.stack_name}-{owner.resource_name}-{short}",
            clock=self._clock,
            deadline=self._clock.now() + self._timeout,
            logger=logging.LoggerAdapter(
                logging.getLogger("converge.resource"),
                {"stack": entity.stack_name, "resource": owner.resource_name},
            ),
            allowed_roots=self._settings.allowed_roots,
            settings=self._settings.plugin_settings,
        )


def _applied(entity: ManagedEntity) -> AppliedState:
    return AppliedState(entity.physical_id, entity.properties, entity.plugin_data)


def _observations(
    plugin: ResourcePlugin,
    live: Mapping[str, Mapping[str, Any]],
    owners: Mapping[str, Owner],
) -> dict[str, Observation]:
    return {
        str(pid): observation(plugin.essence(props), owners.get(pid)) for pid, props in live.items()
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _plugin_bug(exc: Exception) -> PluginError:
    error = PluginError(_describe(exc))
    error.__cause__ = exc
    return error


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # a late failure of an abandoned call: nobody waits for it
