"""One engine process at run time: receives work, runs checks, sweeps, heartbeats.

Long-lived loops are started in one place and cancelled together; each resource check is a
task bounded by a semaphore, so thousands of resources waiting on I/O need no thread each.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from collections import deque
from collections.abc import Collection
from typing import Any

from converge.core import shard
from converge.core.stall import StallWatch
from converge.core.states import Action, Status
from converge.core.traversal import STACK_NODE, GraphNode, TraversalGraph
from converge.engine import liveness
from converge.engine.clock import SystemClock
from converge.engine.context import EngineContext
from converge.engine.drift import DriftHandler
from converge.engine.operations import StackOperations, stack_event
from converge.engine.settings import EngineSettings
from converge.engine.worker import Worker
from converge.errors import ConvergeError, StateError, StoreError, TemplateError
from converge.messages import CheckResource, MessageError, work_checks
from converge.ports import Bus, Clock, Store
from converge.records import CheckInputs, ServiceRecord, StackRecord
from converge.resources.registry import PluginRegistry, default_registry

log = logging.getLogger("converge.engine.runtime")
# The longest pause before a check cut short by the database is tried again.
_RETRY_LONGEST = 30.0
# How many of the nodes a sweep re-sends its warning names.
_LOGGED_NODES = 5

# What a process may do: *engine* sweeps (re-sends lost work, times out operations) and
# takes over what dead processes held; *worker* consumes the work queue and runs checks;
# *observer* runs the synchronizer and drift handling (``Converge.serving``). A process with
# none of them (the CLI against shared state) only starts operations and follows them.
ROLES = ("engine", "worker", "observer")


class Engine:
    """Engine, worker and sweeper roles of one process over a store and a bus.

    ``roles`` chooses the loops this process runs (see ``ROLES``); every process keeps a
    heartbeat row naming its roles, which is how others know a worker is alive.
    """

    def __init__(
        self,
        store: Store,
        bus: Bus,
        *,
        registry: PluginRegistry | None = None,
        settings: EngineSettings | None = None,
        clock: Clock | None = None,
        engine_id: str | None = None,
        roles: Collection[str] = ("engine", "worker"),
    ) -> None:
        unknown = set(roles) - set(ROLES)
        if unknown:
            raise ValueError(f"unknown roles {sorted(unknown)}: choose from {', '.join(ROLES)}")
        self.roles = tuple(role for role in ROLES if role in roles)
        self.ctx = EngineContext(
            store=store,
            bus=bus,
            registry=registry
            or default_registry(
                enable_local_types=(settings or EngineSettings()).enable_local_types
            ),
            settings=settings or EngineSettings(),
            clock=clock or SystemClock(),
            engine_id=engine_id or str(uuid.uuid4()),
            host=(settings.host if settings is not None else None) or liveness.host_name(),
        )
        self.operations = StackOperations(self.ctx)
        self.worker = Worker(self.ctx, self.operations)
        self.drift = DriftHandler(self.ctx, self.operations, self.worker)
        self._semaphore = asyncio.Semaphore(self.ctx.settings.max_concurrent_checks)
        self._checks: set[asyncio.Task[None]] = set()
        # Messages of several checks being started as room frees up (``_run_batch``).
        self._batches: set[asyncio.Task[None]] = set()
        self._waiting_for_room: deque[asyncio.Future[None]] = deque()
        self._loops: list[asyncio.Task[None]] = []
        self._progress = StallWatch(
            self.ctx.settings.sweep_patience,
            self.ctx.settings.longest_sweep_patience,
            max(self.ctx.settings.sweep_busy_patience, self.ctx.settings.sweep_patience),
        )
        # Work the sweeper found stuck and pushed on (a node re-sent, a finished traversal
        # completed): each one is a trigger the edge-triggered path lost. Zero in a healthy
        # run; tests assert it, operators can watch it.
        self.sweeper_rescues = 0
        # Checks this process started itself after a finish (``EngineContext.hand_on``)
        # rather than through the bus.
        self.continued_checks = 0
        self._continued: dict[asyncio.Task[None], CheckResource] = {}
        # The other live processes with the worker role, as of the last heartbeat.
        self._live_workers: set[str] = set()
        # Stacks stored by a create whose traversal never started, by when this sweeper
        # first saw them so (``_start_abandoned_create``).
        self._unstarted: dict[str, float] = {}
        if "worker" in self.roles:
            self.ctx.check_here = self._check_here
        # The live engines that share the sweeping (this one, if an engine), by heartbeat.
        self.sweepers: frozenset[str] = frozenset(
            {self.ctx.engine_id} if "engine" in self.roles else ()
        )
        self._started = False

    @property
    def engine_id(self) -> str:
        return self.ctx.engine_id

    async def start(self) -> None:
        now = self.ctx.clock.now()
        await self.ctx.store.register_service(
            ServiceRecord(
                engine_id=self.engine_id,
                # The host its bound work goes to: how others find a worker for that work.
                host=self.ctx.host,
                pid=os.getpid(),
                roles=self.roles,
                started_at=now,
                heartbeat_at=now,
                process_start=liveness.process_start(os.getpid()),
            )
        )
        await self._refresh_live_engines()
        if "worker" in self.roles:
            await self.ctx.bus.start(self._on_work)
        self._loops = [
            asyncio.create_task(
                self._every(self.ctx.settings.heartbeat_interval, self._heartbeat),
                name="converge-heartbeat",
            )
        ]
        if "engine" in self.roles:
            self._loops.append(
                asyncio.create_task(
                    self._every(self.ctx.settings.sweep_interval, self.sweep),
                    name="converge-sweeper",
                )
            )
        self._started = True
        log.info("engine started", extra={"engine_id": self.engine_id, "roles": self.roles})

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        await self._hand_back_continued()
        await self.ctx.bus.close()
        tasks = [*self._loops, *self._batches, *self._checks]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.operations.close()
        if self.ctx.store.failure is not None:
            return  # the state is unusable: the error that stopped the run is what to report
        await self.ctx.store.remove_service(self.engine_id)
        log.info("engine stopped", extra={"engine_id": self.engine_id})

    async def __aenter__(self) -> Engine:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- work ---------------------------------------------------------------------------

    def _on_work(self, data: dict[str, Any]) -> asyncio.Future[Any]:
        """Start checking the node or nodes a message names; done when every result is
        stored.

        The bus acknowledges a message only when the returned future is done, so a check
        that this process never finished is delivered again (and re-checking is harmless:
        the nodes of a message that were done find their work done).
        """
        try:
            checks = work_checks(data)
        except MessageError as exc:
            log.error("dropped unreadable message", extra={"error": str(exc)})
            dropped: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            dropped.set_result(None)
            return dropped
        if len(checks) == 1:
            return self._start_check(checks[0])
        batch = asyncio.get_running_loop().create_task(self._run_batch(checks))
        self._batches.add(batch)
        batch.add_done_callback(self._batches.discard)
        return batch

    async def _run_batch(self, checks: list[CheckResource]) -> None:
        """The checks of one message, each started once this process has room for it
        (fewer checks started than ``max_concurrent_checks``): the prefetch counts
        messages, and a prefetch of batches started at once would be tens of thousands
        of waiting tasks (2 KB each) in a big stack's worker. Done when all of them are."""
        limit = self.ctx.settings.max_concurrent_checks
        started: list[asyncio.Task[None]] = []
        loop = asyncio.get_running_loop()
        for check in checks:
            while len(self._checks) >= limit:
                room: asyncio.Future[None] = loop.create_future()
                self._waiting_for_room.append(room)
                await room
            started.append(self._start_check(check))
        await asyncio.gather(*started)

    def _check_here(self, message: CheckResource, inputs: CheckInputs | None = None) -> bool:
        """Start a check that a finish here made ready (local continuation), if this
        process takes work and has room for it: fewer checks started than it runs at
        once, so the check does not queue behind work the broker could give another.
        ``inputs``: what the finish read for it (``Worker.check``). A node the finish
        claimed for this process (``claim_ahead.py``) is taken even without room: its
        check replaces the one finishing, and it is this process's to act on."""
        if not self._started:
            return False
        full = len(self._checks) >= self.ctx.settings.max_concurrent_checks
        if full and not self.worker.claimed_ahead_for(message, inputs):
            return False
        self.continued_checks += 1
        task = self._start_check(message, inputs)
        self._continued[task] = message
        task.add_done_callback(self._continued.pop)
        return True

    def _start_check(
        self, message: CheckResource, inputs: CheckInputs | None = None
    ) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(self._run_check(message, inputs=inputs))
        self._checks.add(task)
        task.add_done_callback(self._check_ended)
        return task

    def _check_ended(self, task: asyncio.Task[None]) -> None:
        self._checks.discard(task)
        # The room it leaves goes to one waiting batch, the longest waiting: waking them
        # all at every end would cost each end as many wake-ups as there are batches.
        while self._waiting_for_room:
            room = self._waiting_for_room.popleft()
            if not room.done():
                room.set_result(None)
                return

    async def _run_check(
        self, message: CheckResource, attempt: int = 0, *, inputs: CheckInputs | None = None
    ) -> None:
        """Check a node; ``inputs``, read by the finish that made it ready, serve the
        first attempt only: one tried again later reads them afresh."""
        node = GraphNode(message.resource_id, message.is_update)
        self.ctx.inflight.add((message.traversal_id, node))
        try:
            async with self._semaphore:
                await self.worker.check(message, inputs)
        except StateError as exc:  # the run stops and says so once, not once per node
            log.debug(
                "check stopped: the state failed", extra={"node": str(node), "error": str(exc)}
            )
        except StoreError as exc:
            log.error("check failed", extra={"node": str(node), "error": str(exc)})
            self._check_again_later(message, attempt)
        except ConvergeError as exc:
            log.error("check failed", extra={"node": str(node), "error": str(exc)})
        except Exception:
            # A bug: logged with its traceback; the sweeper retries the node later.
            log.exception("check crashed", extra={"node": str(node)})
        finally:
            self.ctx.inflight.discard((message.traversal_id, node))

    async def _hand_back_continued(self) -> None:
        """Send the continued checks this process has not finished through the bus
        before it stops, as the broker gives back its unacknowledged messages: another
        worker takes them now rather than the sweeper once the traversal stalls."""
        unfinished = [m for task, m in self._continued.items() if not task.done()]
        for message in unfinished:
            node = GraphNode(message.resource_id, message.is_update)
            try:
                await self.ctx.send_check(message.stack_id, message.traversal_id, node)
            except ConvergeError as exc:  # the stack is gone: nothing left to check
                log.info("continued check dropped", extra={"node": str(node), "error": str(exc)})

    def _check_again_later(self, message: CheckResource, attempt: int) -> None:
        """A check the database cut short may have left this process's claim in its row;
        other processes leave a live process's claim alone (its action may be running) and
        the sweepers skip it, so only this process can take the node up again: it checks it
        again itself, backing off while the database stays away."""
        delay = min(_RETRY_LONGEST, self.ctx.settings.sweep_interval * 2 ** min(attempt, 10))

        async def later() -> None:
            await self.ctx.clock.sleep(delay)
            await self._run_check(message, attempt + 1)

        task = asyncio.get_running_loop().create_task(
            later(), name=f"converge-check-again-{message.resource_id}"
        )
        self._checks.add(task)
        task.add_done_callback(self._check_ended)

    async def start_check(self, stack_id: str) -> StackRecord:
        """Start a CHECK of the stack: a traversal the workers run like any other."""
        return await self.operations.check(stack_id)

    def handle_drift(self) -> asyncio.Task[None]:
        """Also run drift handling's passes (``converge serve``): heals gathered from the
        consumer, and the level-triggered recheck every ``drift_recheck_interval`` and for a
        stack as soon as one of its operations settles."""
        task = asyncio.create_task(self._drift_passes(), name="converge-drift-recheck")
        self._loops.append(task)
        return task

    async def _drift_passes(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(
                self._every(self.ctx.settings.drift_recheck_interval, self.drift.recheck),
                name="converge-drift-recheck-periodic",
            )
            group.create_task(
                self.drift.recheck_when_settled(), name="converge-drift-recheck-settled"
            )
            group.create_task(self.drift.heal_when_asked(), name="converge-drift-heal")

    async def idle(self) -> None:
        """Wait until no check is running in this process (tests and one-shot CLI runs)."""
        while self._checks or self._batches:
            running = [*self._batches, *self._checks]
            await asyncio.gather(*running, return_exceptions=True)

    # --- level-triggered safety net ----------------------------------------------------

    async def sweep(self) -> None:
        """Re-send the ready work of stalled traversals; time out overdue operations.

        Each live engine sweeps only the stacks that hash to it (``core.shard`` over the
        live engines), so N engines do not re-send the same work N times; when one dies,
        its stacks hash to the survivors once its heartbeat is stale. A traversal's ready
        nodes are re-sent only once it has stalled (``core.stall``: no new report for
        ``sweep_patience`` sweeps in a row), so work merely queued on the broker behind
        the rest of a moving traversal is not duplicated, and never a node whose row is
        claimed by a live engine (a long action is running there); a traversal whose
        sinks have all reported is likewise completed here only once it has stalled,
        leaving its last worker the time to complete it (counted as a rescue only when
        this sweep is the one that completed it). When a worker is gone, every traversal's
        ready work is re-sent at the next sweep, moving or not: the checks it continued
        itself have no message on the broker to come back. The broker's count of queued
        messages is no guide: it leaves out what a worker's prefetch already holds
        (thousands of checks), so "nothing queued" does not mean "lost".
        """
        if self.engine_id not in self.sweepers:
            return  # a process without the engine role has no share
        # Who is alive, as of now rather than the last heartbeat: a worker that died is
        # noticed at this sweep, and the work it held is re-sent here.
        await self._refresh_live_engines()
        if self.engine_id not in self.sweepers:
            return
        self._progress.observe_activity(await self.ctx.store.latest_event_id())
        stacks = await self.ctx.store.list_stacks(None)
        unstarted: set[str] = set()
        for stack in stacks:
            if stack.status != Status.IN_PROGRESS:
                continue
            if shard.owner(stack.id, self.sweepers) != self.engine_id:
                continue
            if not stack.current_traversal:
                unstarted.add(stack.id)
                await self._start_abandoned_create(stack)
                continue
            traversal = stack.current_traversal
            if stack.deadline is not None and self.ctx.clock.now() >= stack.deadline:
                await self.operations.expire_if_due(stack.id, traversal, stack.deadline)
                continue
            graph = await self.ctx.graph(stack.id, traversal)
            if graph is None:
                continue
            done = await self.ctx.store.reported_senders(traversal)
            self._progress.observe(traversal, len(done))
            if all(sink in done for sink in graph.sinks()):
                # Its last worker completes it (outputs, purge: seconds for a big stack);
                # only a traversal that stays open for the patience is completed here.
                if self._progress.stalled(traversal):
                    self._progress.resent(traversal)
                    if await self.operations.complete_traversal(stack.id, traversal):
                        self.sweeper_rescues += 1
                        log.warning(
                            "sweeper completed a traversal left open",
                            extra={"stack": stack.name, "traversal": traversal},
                        )
                continue
            if self._progress.stalled(traversal) and await self._resend_ready(
                stack, traversal, graph, done
            ):
                self._progress.resent(traversal)
        self._progress.forget_others()
        self._unstarted = {k: v for k, v in self._unstarted.items() if k in unstarted}

    async def _start_abandoned_create(self, stack: StackRecord) -> None:
        """Start the create of a stack stored with its template whose traversal never
        started: the process that stored it died, or lost the database, before the start
        (two commits). Left alone, the stack would say CREATE_IN_PROGRESS forever. Started
        once this sweeper has seen it so for as long as a process takes to be found dead
        (its own clock: the stack's ``created_at`` is the client machine's), and only if
        still unstarted then (``converge``'s ``ending``): a slow client that starts it
        meanwhile wins, and its start and this one never both run. A nested stack is left
        to its owner's traversal, which starts it again."""
        if stack.owner_id is not None or stack.raw_template_id is None:
            return
        if stack.action != Action.CREATE:
            return
        now = self.ctx.clock.now()
        first_seen = self._unstarted.setdefault(stack.id, now)
        if now - first_seen < self.ctx.settings.engine_stale_after:
            return
        new_traversal = uuid.uuid4().hex
        try:
            definition = await self.ctx.definitions.get(stack.raw_template_id)
            started = await self.operations.converge(
                stack.id,
                stack.raw_template_id,
                definition,
                Action.CREATE,
                traversal_id=new_traversal,
                ending="",
            )
        except TemplateError as exc:
            # Not to be tried at every sweep: the stack says why, as a failed create does.
            reason = f"Stack CREATE could not be started: {exc}"
            await self.ctx.store.update_stack(
                stack.id,
                {"status": Status.FAILED, "status_reason": reason},
                expected_key=stack.atomic_key,
                events=[stack_event(stack, Action.CREATE, Status.FAILED, reason)],
            )
            return
        except ConvergeError as exc:
            log.warning(
                "a create left unstarted could not be started",
                extra={"stack": stack.name, "error": str(exc)},
            )
            return
        if started.current_traversal == new_traversal:
            self.sweeper_rescues += 1
            log.warning("sweeper started a create left unstarted", extra={"stack": stack.name})

    async def _resend_ready(
        self,
        stack: StackRecord,
        traversal: str,
        graph: TraversalGraph,
        done: set[GraphNode],
    ) -> bool:
        """Send again the ready nodes that no live process holds; whether there was any.
        They go as a traversal's leaves do (several to a message), and the operator hears
        of it once per traversal: each is a trigger the edge-triggered path lost."""
        lost: list[GraphNode] = []
        for node in graph.nodes:
            if node in done or node == STACK_NODE:
                continue
            if not graph.predecessors_of(node) <= done:
                continue
            key = (traversal, node)
            if key in self.ctx.inflight:
                continue
            if await self._claimed_elsewhere(node):
                continue
            lost.append(node)
        if not lost:
            return False
        self.sweeper_rescues += len(lost)
        log.warning(
            "sweeper re-sends idle work",
            extra={
                "stack": stack.name,
                "traversal": traversal,
                "nodes": len(lost),
                # Which ones, a few: a lost trigger is found from the nodes it left.
                "first_nodes": [str(node) for node in lost[:_LOGGED_NODES]],
                "reported": len(done),
                "why": "a worker is gone"
                if self._progress.suspected(traversal)
                else "no new report for the traversal's patience",
            },
        )
        await self.ctx.send_checks(stack.id, traversal, lost)
        return True

    async def _claimed_elsewhere(self, node: GraphNode) -> bool:
        """Whether another live engine holds the node's row: it is acting on it."""
        row = await self.ctx.store.get_resource(node.resource_id)
        if row is None or row.engine_id is None or row.engine_id == self.engine_id:
            return False
        return await self.ctx.claim_stands(row.engine_id)

    async def _heartbeat(self) -> None:
        await self.ctx.store.heartbeat(self.engine_id, self.ctx.clock.now())
        await self._refresh_live_engines()

    async def _refresh_live_engines(self) -> None:
        """Who is alive: whose claims stand (any role) and who shares the sweeping (the
        engines)."""
        alive = await liveness.live_services(
            self.ctx.store,
            self.engine_id,
            self.ctx.clock.now(),
            self.ctx.settings.engine_stale_after,
            host=self.ctx.host,
        )
        workers = {s.engine_id for s in alive if "worker" in s.roles}
        # Gone since the last look: dead, or its row already removed by another process
        # that found it dead (a worker that stopped sent its continued checks back).
        gone = self._live_workers - workers
        self._live_workers = workers
        if gone:
            # The checks it continued itself had no message on the broker to come back:
            # its traversals' ready work is re-sent at the next sweep, not after a stall.
            log.info("a worker is gone: its work is re-sent", extra={"engine_ids": sorted(gone)})
            self._progress.suspect_all()
        self.ctx.live_engines = {self.engine_id, *(s.engine_id for s in alive)}
        mine = {self.engine_id} if "engine" in self.roles else set()
        self.sweepers = frozenset({*mine, *(s.engine_id for s in alive if "engine" in s.roles)})

    async def _every(self, interval: float, job: Any) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await job()
            except StateError as exc:
                log.debug("periodic job stopped: the state failed", extra={"error": str(exc)})
            except ConvergeError as exc:
                log.warning("periodic job failed", extra={"job": job.__name__, "error": str(exc)})
            except Exception:
                log.exception("periodic job crashed", extra={"job": job.__name__})
