"""Drift handling: the engine as a consumer of the synchronizer's change notifications.

A notification about a managed resource is compared with what its stack applied. By the
stack's drift policy the drift is ignored, recorded with an event (notify), or also
healed: a traversal of the stack's current template that observes just the drifted
resources and converges them (their dependents follow when their inputs change; the
rest decide NOTHING). Heals are rate-limited per resource (``core.heal``); a resource
whose drift keeps coming back is marked FAILED. Drift seen while the stack is busy, and
heals that must wait, are looked at again by ``recheck`` (level-triggered: the database
says what is drifted, the notification only saves waiting).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from converge.core.drift import Drift, DriftPolicy, DriftStatus, compare
from converge.core.heal import HealHistory, Verdict, decide_heal
from converge.core.states import Action, Status
from converge.engine.context import EngineContext
from converge.engine.operations import (
    SETTLED_TOPIC,
    StackOperations,
    current_rows,
    given_up_reason,
    stack_event,
)
from converge.engine.worker import ActionFailed, Worker
from converge.errors import ConvergeError, NotFound
from converge.records import NewEvent, ResourceRecord, StackRecord

log = logging.getLogger("converge.engine.drift")

_DRIFTED = (str(DriftStatus.MODIFIED), str(DriftStatus.DELETED))


class Notification(Protocol):
    """What the engine reads of a ``ChangeNotification`` (converge.messages)."""

    @property
    def physical_id(self) -> str: ...
    @property
    def kind(self) -> str: ...  # "appeared" | "changed" | "gone"
    @property
    def essence(self) -> Mapping[str, Any] | None: ...
    @property
    def stack_id(self) -> str | None: ...
    @property
    def resource_id(self) -> int | None: ...
    @property
    def observed_at(self) -> float: ...


class EntitySnapshot(Protocol):
    @property
    def entities(self) -> Iterable[Any]: ...


class DriftHandler:
    def __init__(self, ctx: EngineContext, operations: StackOperations, worker: Worker) -> None:
        self.ctx = ctx
        self.operations = operations
        self.worker = worker
        # Resources whose reality changed while their stack was busy: looked at again.
        self._later: set[tuple[str, int]] = set()
        self._healing: dict[str, asyncio.Lock] = {}
        # Stacks the consumer found drifted, healed together by ``heal_when_asked``.
        self._heal_wanted: set[str] = set()
        self._heal_asked = asyncio.Event()
        self._gathering = False

    # --- the consumer callbacks (converge.observe.consume) ------------------------------

    async def apply_snapshot(self, snapshot: EntitySnapshot) -> None:
        for entity in snapshot.entities:
            stack_id = getattr(entity, "stack_id", None)
            resource_id = getattr(entity, "resource_id", None)
            if stack_id and resource_id is not None:
                await self.observed(
                    stack_id,
                    int(resource_id),
                    str(entity.physical_id),
                    entity.essence,
                    observed_at=float(getattr(entity, "last_seen", 0.0)),
                )

    async def apply_change(self, notification: Notification) -> None:
        if not notification.stack_id or notification.resource_id is None:
            return  # not managed by any stack
        essence = None if notification.kind == "gone" else notification.essence
        try:
            await self.observed(
                notification.stack_id,
                int(notification.resource_id),
                notification.physical_id,
                essence,
                observed_at=notification.observed_at,
            )
        except ConvergeError as exc:
            # The store failed: recheck looks at it again rather than the consumer dying.
            self._later.add((notification.stack_id, int(notification.resource_id)))
            log.warning("drift not handled yet", extra={"error": str(exc)})

    # --- evaluating one observation -------------------------------------------------

    async def observed(
        self,
        stack_id: str,
        resource_id: int,
        physical_id: str,
        essence: Mapping[str, Any] | None,
        *,
        observed_at: float,
    ) -> None:
        """A resource's reality as seen at ``observed_at`` (essence None: gone)."""
        if not await self._judge(stack_id, resource_id, physical_id, essence, observed_at):
            return
        if self._gathering:
            self._heal_wanted.add(stack_id)
            self._heal_asked.set()
        else:
            await self.heal(stack_id)

    async def heal_when_asked(self) -> None:
        """Heal the stacks found drifted, a moment after the first ask (runs until cancelled).

        Drift seldom comes alone: a killed server and its defaced page are two notifications
        milliseconds apart. Healing at the first would make the stack busy and leave the
        second for after that heal; gathering for ``heal_gather_window`` heals both at once.
        """
        self._gathering = True
        try:
            while True:
                await self._heal_asked.wait()
                await asyncio.sleep(self.ctx.settings.heal_gather_window)
                self._heal_asked.clear()
                wanted, self._heal_wanted = self._heal_wanted, set()
                for stack_id in sorted(wanted):
                    # A failure is logged; the periodic pass finds the recorded drift again.
                    try:
                        await self.heal(stack_id)
                    except ConvergeError as exc:
                        log.warning("heal not started", extra={"error": str(exc)})
                    except Exception:
                        log.exception("heal crashed", extra={"stack": stack_id})
        finally:
            self._gathering = False

    async def _judge(
        self,
        stack_id: str,
        resource_id: int,
        physical_id: str,
        essence: Mapping[str, Any] | None,
        observed_at: float,
    ) -> bool:
        """Record the drift an observation shows; True when the stack should be healed.

        Observations race (a sample, a notification, a direct look): one older than the
        drift already recorded is dropped, so a stale "in sync" never hides new drift.
        """
        try:
            stack = await self.ctx.store.get_stack(stack_id)
        except NotFound:
            return False
        if stack.deleted or stack.drift_policy == DriftPolicy.IGNORE:
            return False
        row = await self.ctx.store.get_resource(resource_id)
        if row is None or row.physical_resource_id != physical_id:
            return False  # replaced or deleted since: this is about a thing we let go
        if row.drift_checked_at is not None and row.drift_checked_at > observed_at:
            # A newer observation was recorded already: this one is not applied. But
            # ``observed_at`` is when an observation *began*, and one that began earlier
            # may have read reality later (a sampler pass slowed by load, against a direct
            # look): dropped for good, its change would be lost, since the sampler's
            # baseline has it now and it publishes a change only once. So look again,
            # directly: that look begins after everything recorded so far.
            self._look_again(stack_id, resource_id)
            return False
        if _is_busy(stack, row):
            # Our own actions change reality too: judge only once the stack settled (the
            # settled stack is looked at again at once: ``recheck_when_settled``).
            self._later.add((stack_id, resource_id))
            return False
        if row.type not in self.ctx.registry:
            return False
        plugin = self.ctx.registry.plugin(row.type)
        hidden = frozenset(n for n, p in plugin.properties_schema.items() if p.hidden)
        concealed = (await self.ctx.hidden_values(row.current_template_id)).conceals
        drift = compare(plugin.essence(row.properties_data), essence, hidden, concealed)
        if not await self._record(stack, row, drift, observed_at):
            self._look_again(stack_id, resource_id)  # lost a race with a newer one: as above
            return False
        return drift.status != DriftStatus.IN_SYNC and stack.drift_policy == DriftPolicy.HEAL

    def _look_again(self, stack_id: str, resource_id: int) -> None:
        """Observe this resource directly at the next ``recheck`` (level-triggered)."""
        self._later.add((stack_id, resource_id))

    async def _record(
        self, stack: StackRecord, row: ResourceRecord, drift: Drift, observed_at: float
    ) -> bool:
        """Store the drift; False when a newer observation got there first."""
        detail = {name: dict(change) for name, change in drift.detail.items()}
        if row.drift_status == drift.status and dict(row.drift_detail) == detail:
            return True  # nothing new: no duplicate events
        events: list[NewEvent] = []
        if drift.status == DriftStatus.IN_SYNC:
            if row.drift_status in _DRIFTED:
                events.append(_event(row, Status.COMPLETE, "Drift resolved: reality matches again"))
        else:
            reason = f"Drift found: {drift.describe()}"
            if stack.drift_policy == DriftPolicy.NOTIFY:
                reason += " (drift policy notify: not corrected)"
            events.append(_event(row, Status.COMPLETE, reason))
        stored = await self.ctx.store.set_drift(
            row.id,
            {"drift_status": str(drift.status), "drift_detail": detail},
            events=events,
            stack_id=stack.id,
            observed_at=observed_at,
        )
        if stored:
            log.info(
                "drift", extra={"stack": stack.name, "resource": row.name, "drift": drift.status}
            )
        return stored

    # --- healing ---------------------------------------------------------------------

    async def heal(self, stack_id: str) -> StackRecord | None:
        """Start a heal of the stack's drifted resources that may be healed now.

        The consumer and recheck of every engine heal: one at a time per stack, or two
        would count the same attempt and start two updates. In this process a lock makes
        the others wait; across processes the ``heal:<stack id>`` lease in the database
        lets one through, and another engine's heal is skipped: the holder reads the
        drift as stored when it starts, and what is recorded after that is found again
        by ``recheck`` (level-triggered).
        """
        async with self._healing.setdefault(stack_id, asyncio.Lock()):
            lease = f"heal:{stack_id}"
            now = self.ctx.clock.now()
            taken = await self.ctx.store.take_lease(
                lease,
                self.ctx.engine_id,
                now=now,
                # A heal only decides and starts an update: far shorter than this, unless
                # this engine hangs, when it should not block the others for good.
                ttl=self.ctx.settings.engine_stale_after,
                live_after=now - self.ctx.settings.engine_stale_after,
            )
            if not taken:
                log.info("another engine is healing the stack", extra={"stack": stack_id})
                return None
            try:
                return await self._heal(stack_id)
            finally:
                await self.ctx.store.release_lease(lease, self.ctx.engine_id)

    async def _heal(self, stack_id: str) -> StackRecord | None:
        stack = await self.ctx.store.get_stack(stack_id)
        if not _may_heal(stack) or stack.raw_template_id is None:
            return None
        rows = current_rows(await self.ctx.store.list_resources(stack.id), None)
        now = self.ctx.clock.now()
        policy = self.ctx.settings.heal_policy
        names: list[str] = []
        events: list[NewEvent] = []
        given_up = [row for row in rows.values() if _given_up(row)]
        if given_up and stack.status != Status.FAILED:
            # Given up on, and the stack not told (its process stopped in between).
            await self._say_given_up(stack, given_up)
            return None
        for row in rows.values():
            if row.drift_status not in _DRIFTED or row.status == Status.FAILED:
                continue
            history = HealHistory(row.heal_attempts, row.heal_last_at, row.heal_next_at)
            decision = decide_heal(history, now, policy)
            if decision.verdict == Verdict.WAIT:
                continue  # recheck comes back when it is due
            if decision.verdict == Verdict.GIVE_UP:
                await self._give_up(stack, row, decision.reason)
                continue
            healed = decision.history
            await self.ctx.store.set_drift(
                row.id,
                {
                    "heal_attempts": healed.attempts,
                    "heal_last_at": healed.last_attempt_at,
                    "heal_next_at": healed.next_allowed_at,
                },
            )
            names.append(row.name)
            found = Drift(DriftStatus(row.drift_status), row.drift_detail).describe()
            events.append(
                _event(
                    row,
                    Status.IN_PROGRESS,
                    f"Healing drift ({found}): converging it to the template ({decision.reason})",
                )
            )
        if not names:
            return None
        definition = await self.ctx.definitions.get(stack.raw_template_id)
        try:
            return await self.operations.converge(
                stack.id,
                stack.raw_template_id,
                definition,
                Action.UPDATE,
                reason=f"Stack UPDATE started to heal drift of {', '.join(sorted(names))}",
                previous_template_id=stack.prev_raw_template_id,
                converge_names=names,
                events=events,
            )
        except ConvergeError as exc:
            log.warning("heal could not start", extra={"stack": stack.name, "error": str(exc)})
            return None

    async def _give_up(self, stack: StackRecord, row: ResourceRecord, why: str) -> None:
        found = Drift(DriftStatus(row.drift_status), row.drift_detail).describe()
        reason = f"{_NOT_HEALED}: {why}; last found {found}"
        given_up = await self.ctx.store.update_resource(
            row.id,
            row.atomic_key,
            {"status": Status.FAILED, "status_reason": reason},
            events=[_event(row, Status.FAILED, reason, action=row.action)],
            stack_id=stack.id,
        )
        if given_up is not None:
            await self._say_given_up(stack, [given_up])

    async def _say_given_up(self, stack: StackRecord, rows: list[ResourceRecord]) -> None:
        """The stack says so too (show, list): a stack that looks complete while one of its
        resources is left drifted would hide the one thing the user must act on. A second
        commit: a heal pass that finds a given-up row under a stack not FAILED says it."""
        stack_reason = given_up_reason(rows)
        marked = await self.ctx.store.update_stack(
            stack.id,
            {"status": Status.FAILED, "status_reason": stack_reason},
            expected_key=stack.atomic_key,
            events=[stack_event(stack, stack.action, Status.FAILED, stack_reason)],
        )
        if marked is None:
            log.info("stack changed while giving up on a heal", extra={"stack": stack.name})

    # --- the level-triggered pass -------------------------------------------------------

    async def recheck_when_settled(self) -> None:
        """Recheck a stack as soon as one of its operations settles (runs until cancelled).

        Drift seen while a heal ran waits in ``_later``; without this it would wait for
        the next periodic pass, seconds after the heal that kept it waiting ended.
        """
        subscription = await self.ctx.bus.subscribe(SETTLED_TOPIC)
        try:
            async for message in subscription:
                try:
                    await self.recheck(only=str(message["stack_id"]))
                except ConvergeError as exc:
                    log.warning("recheck after settling failed", extra={"error": str(exc)})
                except Exception:
                    # A bug: logged with its traceback; the periodic pass still runs.
                    log.exception("recheck after settling crashed")
        finally:
            await subscription.close()

    async def recheck(self, only: str | None = None) -> None:
        """Observe again what was seen while busy, what heal-policy stacks have drifted, and
        what the synchronizer has never confirmed; then heal each stack once, for all of
        its drifted resources together. ``only``: just this stack.

        Observed directly (not from a notification): drift recorded earlier may be gone
        by now, and a heal must act on reality as it is.
        """
        later = {item for item in self._later if only is None or item[0] == only}
        self._later -= later
        if only is None:
            stacks = {s.id: s for s in await self.ctx.store.list_stacks(None)}
        else:
            try:
                stacks = {only: await self.ctx.store.get_stack(only)}
            except NotFound:
                return
        now = self.ctx.clock.now()
        stable_after = self.ctx.settings.heal_policy.stable_after
        to_heal: set[str] = set()
        for stack in stacks.values():
            if stack.drift_policy == DriftPolicy.IGNORE or not _may_heal(stack):
                continue
            healing = stack.drift_policy == DriftPolicy.HEAL
            for row in await self.ctx.store.list_resources(stack.id):
                if _given_up(row) and stack.status != Status.FAILED:
                    # Given up on, its stack not told (a process stopped in between: the
                    # stack says COMPLETE): the heal pass says so (``_heal``).
                    to_heal.add(stack.id)
                elif _never_confirmed(row):
                    # The synchronizer never saw it: gone before its first sample (or while
                    # no synchronizer ran), so no sampler can notice that it is missing.
                    later.add((stack.id, row.id))
                elif healing and row.status != Status.FAILED:
                    # Recently healed ones too: a sampler that missed the healed state
                    # between two changes by someone else would see no change at all.
                    recently_healed = (
                        row.heal_last_at is not None and now - row.heal_last_at < stable_after
                    )
                    if row.drift_status in _DRIFTED or recently_healed:
                        later.add((stack.id, row.id))
        for stack_id, resource_id in sorted(later):
            owner = stacks.get(stack_id)
            found = await self.ctx.store.get_resource(resource_id)
            if owner is None or found is None or found.physical_resource_id is None:
                continue
            stack, row = owner, found
            if _is_busy(stack, row):
                self._later.add((stack_id, resource_id))
                continue
            if row.type not in self.ctx.registry:
                continue
            started = self.ctx.clock.now()
            try:
                observed = (await self.worker.observe_drift(stack, row)).essence
            except ActionFailed as failed:
                log.warning("cannot observe", extra={"resource": row.name, "error": failed.reason})
                self._look_again(stack_id, resource_id)  # still unknown: the next pass tries
                continue
            if await self._judge(
                stack_id, resource_id, found.physical_resource_id, observed, started
            ):
                to_heal.add(stack_id)
        # One heal per stack, after every resource was judged: healing at the first
        # drifted one would leave the others waiting, the stack busy, for another pass.
        for stack_id in sorted(to_heal):
            await self.heal(stack_id)


# How a resource given up on says so (``_give_up``); ``_given_up`` finds it by this.
_NOT_HEALED = "Drift not healed"


def _given_up(row: ResourceRecord) -> bool:
    return (
        row.status == Status.FAILED
        and row.drift_status in _DRIFTED
        and row.status_reason.startswith(_NOT_HEALED)
    )


def _never_confirmed(row: ResourceRecord) -> bool:
    return (
        row.status == Status.COMPLETE
        and row.physical_resource_id is not None
        and row.drift_status == str(DriftStatus.NOT_CHECKED)
    )


def _is_busy(stack: StackRecord, row: ResourceRecord) -> bool:
    return stack.status == Status.IN_PROGRESS or row.status == Status.IN_PROGRESS


def _may_heal(stack: StackRecord) -> bool:
    """A settled stack, or one whose last heal failed (a user's failed update is theirs)."""
    if stack.deleted or stack.action == Action.DELETE or stack.status == Status.IN_PROGRESS:
        return False
    return stack.status == Status.COMPLETE or stack.converge_names is not None


def _event(
    row: ResourceRecord, status: Status, reason: str, *, action: Action = Action.CHECK
) -> NewEvent:
    return NewEvent(
        resource_name=row.name,
        resource_type=row.type,
        action=str(action),
        status=str(status),
        reason=reason,
        physical_resource_id=row.physical_resource_id,
    )
