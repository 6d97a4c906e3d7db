"""The public Python API (asyncio): create, update, delete, cancel, wait, show and list.

    async with Converge.embedded("converge.db") as cv:
        stack = await cv.create_stack("demo", template_text)
        print(stack.stack_status)

Every mutating call returns at once with ``wait=False`` (so a second update can be started
while the first runs) or when the stack settles with ``wait=True``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import re
import uuid
from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from converge import catalog
from converge.adapters.local_bus import LocalBus
from converge.adapters.sql.feed import EventFeed, FeedEvent
from converge.adapters.sql.store import SqlStore
from converge.adapters.sql.tokens import TokenRecord, TokenStore, new_secret
from converge.core.baseline import Snapshot
from converge.core.decide import MISSING, Change, decide_converging
from converge.core.drift import MASK, DriftStatus
from converge.core.schema import ResourceTypeSchema
from converge.core.states import Action, Status
from converge.core.template import (
    Environment,
    ResourceDefinition,
    StackDefinition,
    StackIdentity,
    Template,
    environment_from_data,
    load_environment,
    load_template,
    merge_environments,
    pseudo_parameters,
    template_from_data,
)
from converge.core.template.nested import child_environment
from converge.engine import liveness
from converge.engine.context import applied_state
from converge.engine.drift_diff import drift_diffs
from converge.engine.inputs import StoredData
from converge.engine.operations import (
    SETTLED_TOPIC,
    current_rows,
    is_superseded,
    stack_event,
)
from converge.engine.runtime import Engine
from converge.engine.settings import EngineSettings
from converge.engine.validation import prepare_definition
from converge.engine.worker import ActionFailed, resource_state, template_changed
from converge.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    PluginError,
    StateError,
    Superseded,
    TemplateError,
)
from converge.messages import CheckResource
from converge.ports import Bus
from converge.records import (
    NewEvent,
    NewTemplate,
    ResourceRecord,
    ServiceRecord,
    StackRecord,
    TemplateRecord,
)
from converge.resources.builtin import world
from converge.resources.registry import PluginRegistry
from converge.views import DriftView, EventView, PlannedChange, ResourceView, StackView

log = logging.getLogger("converge.api")

_STACK_NAME = re.compile(r"^[a-zA-Z][a-zA-Z0-9_.-]{0,254}$")
_TEMPLATE_READ_ATTEMPTS = 20
_PROJECT = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
ROLES = ("admin", "member", "reader")
HOOKS = ("pre-create", "pre-update", "pre-delete", "post-create", "post-update", "post-delete")


@dataclass(frozen=True)
class Source:
    """Template or environment text with the name errors should point at."""

    text: str
    filename: str


TemplateInput = str | Source | Mapping[str, Any]


@dataclass(frozen=True)
class Operation:
    """A create or update this handle started: what tells whether it still stands."""

    stack_id: str
    stack_name: str
    action: str
    traversal_id: str
    template_id: int


class Converge:
    """A handle on converge: an engine in this process over a store and a bus."""

    def __init__(self, engine: Engine, *, project_id: str | None = None) -> None:
        self.engine = engine
        self._ctx = engine.ctx
        self._store = engine.ctx.store
        self._operations: dict[str, Operation] = {}  # the last one started, by stack id
        self._project_id = project_id or engine.ctx.settings.project_id

    def for_project(self, project_id: str) -> Converge:
        """The same engine seen from one project: every stack call is confined to it."""
        return Converge(self.engine, project_id=project_id)

    def _sql(self) -> SqlStore:
        """The SQL store this API was opened on: tokens, the event feed and the baseline
        snapshot are read through it directly (they are the API's, not the engine's)."""
        if not isinstance(self._store, SqlStore):
            raise TypeError(f"converge.api needs a SqlStore, not {type(self._store).__name__}")
        return self._store

    # --- opening -----------------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def embedded(
        cls,
        state: str | Path = "converge.db",
        *,
        settings: EngineSettings | None = None,
        registry: PluginRegistry | None = None,
        read_only: bool = False,
        broker_url: str | None = None,
        broker_namespace: str = "converge",
        roles: Collection[str] = ("engine", "worker"),
    ) -> AsyncIterator[Converge]:
        """The embedded default: a SQLite file and an in-process bus (or RabbitMQ at
        ``broker_url``, for several processes of one host sharing the file; ``roles`` as
        for ``open``).

        A missing file is a new state (made 0600). ``read_only=True`` only reads: no
        engine runs (no service row, heartbeat or migration), the file may be read-only,
        and a missing one is ``NotFound``; reading calls (get, list, events, outputs) work.

        The built-in test types keep their simulated reality (the test world) beside the
        state file unless ``settings.plugin_settings["test_world"]`` names another file.
        """
        settings = settings or EngineSettings()
        if world.SETTING not in settings.plugin_settings:
            plugin_settings = {
                **settings.plugin_settings,
                world.SETTING: str(world.world_path_for(state)),
            }
            settings = dataclasses.replace(settings, plugin_settings=plugin_settings)
        bus = _bus(broker_url, broker_namespace, roles, read_only=read_only, settings=settings)
        store = SqlStore.open_file(state, read_only=read_only)
        async with cls._over(
            store, settings, registry, start=not read_only, bus=bus, roles=roles
        ) as cv:
            yield cv

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        database_url: str,
        *,
        settings: EngineSettings | None = None,
        registry: PluginRegistry | None = None,
        broker_url: str | None = None,
        broker_namespace: str = "converge",
        roles: Collection[str] = ("engine", "worker"),
        read_only: bool = False,
    ) -> AsyncIterator[Converge]:
        """An engine over the database at ``database_url`` (SQLite or PostgreSQL) and the
        in-process bus, or RabbitMQ at ``broker_url`` (``amqp://…``): every process opened
        with the same database, broker and namespace shares the work.

        ``roles`` are the engine's (``converge.engine.runtime.ROLES``): with a broker, a
        handle that only starts operations and follows them passes ``()`` and leaves the
        checks to the worker processes. ``read_only=True`` runs no engine at all (reading
        calls only), as for ``embedded``.
        """
        bus = _bus(
            broker_url,
            broker_namespace,
            roles,
            read_only=read_only,
            settings=settings or EngineSettings(),
        )
        store = SqlStore.open(database_url)
        async with cls._over(
            store, settings, registry, start=not read_only, bus=bus, roles=roles
        ) as cv:
            yield cv

    @classmethod
    @asynccontextmanager
    async def _over(
        cls,
        store: SqlStore,
        settings: EngineSettings | None,
        registry: PluginRegistry | None,
        *,
        start: bool,
        bus: Bus | None = None,
        roles: Collection[str] = ("engine", "worker"),
    ) -> AsyncIterator[Converge]:
        engine = Engine(store, bus or LocalBus(), registry=registry, settings=settings, roles=roles)
        try:
            if start:
                await engine.start()
            yield cls(engine)
        finally:
            try:
                await engine.stop()
            finally:
                await store.close()

    @asynccontextmanager
    async def serving(self) -> AsyncIterator[Any]:
        """Run the synchronizer and drift handling with this engine (``converge serve``).

        The engine consumes the synchronizer's snapshot and change notifications; each
        stack's drift policy says what happens to drift. Yields the ``Synchronizer``.
        """
        from converge.observe import Synchronizer

        sync = Synchronizer(
            self._store,
            self._ctx.bus,
            self._ctx.registry,
            self._ctx.clock,
            self._ctx.settings,
            # Seen by the other observers by this engine's row: they divide the types.
            observer_id=self.engine.engine_id if "observer" in self.engine.roles else None,
        )
        await sync.start()
        tasks = [
            self.engine.handle_drift(),
            asyncio.create_task(self._consume(sync), name="converge-drift-consumer"),
            asyncio.create_task(self._resample_settled(sync), name="converge-resample"),
        ]
        try:
            yield sync
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await sync.stop()

    async def _resample_settled(self, sync: Any) -> None:
        """Sample a stack's types as soon as one of its operations settles (the types this
        observer samples: every observer hears of it)."""
        subscription = await self._ctx.bus.subscribe(SETTLED_TOPIC)
        try:
            async for message in subscription:
                for type_name in message.get("types", []):
                    if not sync.membership.owns(type_name):
                        continue
                    try:
                        await sync.sample_once(type_name)
                    except Exception:
                        log.exception("resampling %s after a settled operation failed", type_name)
        finally:
            await subscription.close()

    async def _consume(self, sync: Any) -> None:
        """Consume notifications for good: a failure is logged and the consumer restarts."""
        from converge.observe import consume

        handler = self.engine.drift
        while True:
            try:
                await consume(sync, None, handler.apply_snapshot, handler.apply_change)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("drift consumer failed; restarting it")
                await asyncio.sleep(self._ctx.settings.drift_recheck_interval)

    def raise_if_state_failed(self) -> None:
        """Raise the ``StateError`` that made the store unusable, if one did (a damaged or
        full state: every later store call fails the same way, so a long run stops)."""
        failure = self._store.failure
        if failure is not None:
            raise StateError(failure.location, failure.reason)

    async def live_services(self, role: str | None = None) -> list[ServiceRecord]:
        """The processes sharing this state that are alive (their heartbeat is fresher than
        ``engine_stale_after``, and on this host their process still runs), with ``role``
        if given: a CLI over a broker asks whether any worker will do its work."""
        since = self._ctx.clock.now() - self._ctx.settings.engine_stale_after
        host = liveness.host_name()
        return [
            service
            for service in await self._store.list_services()
            if service.heartbeat_at > since
            and not liveness.is_dead_here(service, host)
            and (role is None or role in service.roles)
        ]

    @property
    def project_id(self) -> str:
        return self._project_id

    # --- stack operations ----------------------------------------------------------------

    async def create_stack(
        self,
        name: str,
        template: TemplateInput,
        *,
        environments: Sequence[TemplateInput] = (),
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        disable_rollback: bool = False,
        timeout_mins: float | None = None,
        drift_policy: str = "notify",
        tags: Sequence[str] = (),
        wait: bool = True,
    ) -> StackView:
        _check_stack_name(name)
        _check_drift_policy(drift_policy)
        stack_id = str(uuid.uuid4())
        files = dict(files or {})
        parameters = dict(parameters or {})
        loaded = _load_template(template)
        environment = _merge(environments)
        definition = self._prepare(
            loaded, environment, files, parameters, StackIdentity(name, stack_id, self.project_id)
        )
        # The stack and its template in one transaction: never one without the other.
        created = await self._store.create_stack(
            name,
            self.project_id,
            action=Action.CREATE,
            disable_rollback=disable_rollback,
            timeout_mins=timeout_mins,
            drift_policy=drift_policy,
            tags=tags,
            stack_id=stack_id,
            template=NewTemplate(loaded.data, environment.to_data(), files, parameters),
        )
        template_id = created.raw_template_id
        assert template_id is not None  # stored with the stack, just above
        self._ctx.definitions.put(template_id, definition)
        started = await self.engine.operations.converge(
            stack_id, template_id, definition, Action.CREATE
        )
        return await self._settle_operation(self._started(started, Action.CREATE), wait)

    async def update_stack(
        self,
        name_or_id: str,
        template: TemplateInput | None = None,
        *,
        environments: Sequence[TemplateInput] | None = None,
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        existing: bool = False,
        disable_rollback: bool | None = None,
        timeout_mins: float | None = None,
        drift_policy: str | None = None,
        converge: bool = False,
        clear_parameters: Sequence[str] = (),
        wait: bool = True,
    ) -> StackView:
        """Update the stack; ``existing=True`` is Heat's PATCH: unspecified parts are kept
        (``clear_parameters`` names kept parameters to drop, back to their defaults).

        ``converge=True`` (Heat's ``converge: true``) compares the template with observed
        reality instead of only with what was last applied: drifted resources are
        corrected, deleted ones created again. ``settings.observe_on_update`` makes that
        the rule for every update.
        """
        if template is None and not existing:
            raise InvalidRequest("a template is required unless the update is a PATCH (existing)")
        if drift_policy is not None:
            _check_drift_policy(drift_policy)
        stack, stored, previous = await self._current_template(name_or_id)
        loaded = (
            _load_template(template)
            if template is not None
            else template_from_data(stored.template, filename="<existing template>")
        )
        if environments is None and existing:
            environment = environment_from_data(stored.environment)
        else:
            environment = _merge(environments or ())
        new_files = {**stored.files, **(files or {})} if existing else dict(files or {})
        new_parameters = (
            {**stored.parameters, **(parameters or {})} if existing else dict(parameters or {})
        )
        for name in clear_parameters:
            new_parameters.pop(name, None)
        definition = self._prepare(
            loaded,
            environment,
            new_files,
            new_parameters,
            StackIdentity(stack.name, stack.id, stack.project_id),
            previous_parameters=previous.parameters,
        )
        settings: dict[str, Any] = {}
        if disable_rollback is not None:
            settings["disable_rollback"] = disable_rollback
        if timeout_mins is not None:
            settings["timeout_mins"] = timeout_mins
        if drift_policy is not None:
            settings["drift_policy"] = drift_policy
        if settings:
            await self._store.update_stack(stack.id, settings)
        template_id = await self._store.add_template(
            stack.id, loaded.data, environment.to_data(), new_files, new_parameters
        )
        self._ctx.definitions.put(template_id, definition)
        started = await self.engine.operations.converge(
            stack.id, template_id, definition, Action.UPDATE, converge=converge
        )
        return await self._settle_operation(self._started(started, Action.UPDATE), wait)

    async def _current_template(
        self, name_or_id: str
    ) -> tuple[StackRecord, TemplateRecord, StackDefinition]:
        """The stack and the template it is converging to now.

        A concurrent operation may finish and purge that template between the two reads:
        then the stack is read again.
        """
        for _attempt in range(_TEMPLATE_READ_ATTEMPTS):
            stack = await self._find(name_or_id)
            if stack.action == Action.DELETE:
                raise Conflict(f"stack {stack.name} is {stack.state}: it cannot be updated")
            if stack.raw_template_id is None:
                # A stack is stored with its template; only a state written by an older
                # converge, whose create stopped in between, has a stack without one.
                raise Conflict(
                    f"stack {stack.name} has no template (its create was interrupted before "
                    "the template was stored): `converge destroy` it, then apply again"
                )
            try:
                stored = await self._store.get_template(stack.raw_template_id)
                previous = await self._ctx.definitions.get(stack.raw_template_id)
            except NotFound:
                continue
            return stack, stored, previous
        raise Conflict(f"stack {name_or_id} changes too fast to be updated now; try again")

    async def delete_stack(self, name_or_id: str, *, wait: bool = True) -> StackView:
        stack = await self._find(name_or_id)
        await self.engine.operations.delete(stack)
        return await self._settle(stack.id, wait)

    async def cancel_update(
        self, name_or_id: str, *, rollback: bool = True, wait: bool = True
    ) -> StackView:
        stack = await self._find(name_or_id)
        await self.engine.operations.cancel_update(stack, rollback=rollback)
        return await self._settle(stack.id, wait)

    async def clear_hook(self, name_or_id: str, resource_name: str, hook: str) -> None:
        """Clear a breakpoint a resource is paused at (Heat's ``unset_hook`` signal)."""
        if hook not in HOOKS:
            raise InvalidRequest(f"unknown hook {hook!r}: use one of {', '.join(HOOKS)}")
        stack = await self._find(name_or_id)
        rows = [
            row for row in await self._store.list_resources(stack.id) if row.name == resource_name
        ]
        if not rows:
            raise NotFound(f"stack {stack.name} has no resource {resource_name!r}")
        for row in rows:
            pending = row.hook_pending or {}
            if pending.get("hook") != hook or pending.get("traversal") != stack.current_traversal:
                continue
            cleared = await self._store.update_resource(
                row.id,
                row.atomic_key,
                {
                    "hook_pending": None,
                    "cleared_hooks": [*row.cleared_hooks, f"{stack.current_traversal}:{hook}"],
                },
                events=[
                    stack_event(stack, stack.action, Status.IN_PROGRESS, "").__class__(
                        resource_name=row.name,
                        resource_type=row.type,
                        action=str(row.action),
                        status=str(row.status),
                        reason=f"Hook {hook} is cleared",
                        physical_resource_id=row.physical_resource_id,
                    )
                ],
                stack_id=stack.id,
            )
            if cleared is None:
                raise Conflict(f"resource {resource_name} changed while clearing {hook}; try again")
            node_id, is_update = pending["node"]
            message = CheckResource(
                stack.id, stack.current_traversal, int(node_id), bool(is_update)
            )
            await self._ctx.bus.send_work(message.to_dict())
            return
        raise Conflict(f"resource {resource_name} of stack {stack.name} is not paused at {hook}")

    async def check_stack(self, name_or_id: str, *, wait: bool = True) -> StackView:
        """Observe every resource and record its drift; ends CHECK_COMPLETE or CHECK_FAILED."""
        stack = await self._find(name_or_id)
        await self.engine.start_check(stack.id)
        return await self._settle(stack.id, wait)

    async def drift(self, name_or_id: str, *, diffs: bool = False) -> list[DriftView]:
        """Each resource's drift as last recorded (by a check, an update or the observer).

        ``diffs``: also observe each modified resource whose type can show how it differs
        (a file's content diff instead of two digests), as ``drift_diff``.
        """
        stack = await self._find(name_or_id, include_deleted=True)
        rows = current_rows(await self._store.list_resources(stack.id), None)
        views = []
        for row in sorted(rows.values(), key=lambda r: r.name):
            view = DriftView.of(row)
            if diffs:
                shown = await drift_diffs(self._ctx, self.engine.worker, stack, row)
                view = dataclasses.replace(view, drift_diff=shown)
            views.append(view)
        return views

    async def wait(self, name_or_id: str) -> StackView:
        stack = await self._find(name_or_id, include_deleted=True)
        return await self._settle(stack.id, True)

    # --- reading -----------------------------------------------------------------------

    async def get_stack(self, name_or_id: str, *, include_deleted: bool = False) -> StackView:
        stack = await self._find(name_or_id, include_deleted=include_deleted)
        return await self._view(stack)

    async def list_stacks(
        self, *, show_nested: bool = False, include_deleted: bool = False
    ) -> list[StackView]:
        """The live stacks; nested stacks (made by provider templates) only if asked, or
        when their owner is gone (a nested stack kept by ``deletion_policy: Retain``)."""
        stacks = await self._store.list_stacks(self.project_id, include_deleted=include_deleted)
        live = {stack.id for stack in stacks}
        return [
            await self._view(stack)
            for stack in stacks
            if show_nested or stack.owner_id is None or stack.owner_id not in live
        ]

    async def list_resources(self, name_or_id: str) -> list[ResourceView]:
        stack = await self._find(name_or_id, include_deleted=True)
        rows = await self._store.list_resources(stack.id)
        return self._resource_views(rows, rows, await self._written_types(stack))

    async def _written_types(self, stack: StackRecord) -> dict[str, tuple[str, str]]:
        """Per resource name, (implementation, type as written) where the template's
        environment mapped the type (an alias, a provider template): Heat shows the written
        one."""
        if stack.raw_template_id is None or stack.deleted:
            return {}
        try:
            definition = await self._ctx.definitions.get(stack.raw_template_id)
        except (NotFound, TemplateError):
            return {}
        return {
            name: (resource.implementation_type, resource.type)
            for name, resource in definition.resources.items()
            if resource.type != resource.implementation_type
        }

    def _resource_views(
        self,
        rows: Sequence[ResourceRecord],
        every: Sequence[ResourceRecord],
        written: Mapping[str, tuple[str, str]] | None = None,
    ) -> list[ResourceView]:
        """Views of ``rows``; ``every`` row of the stack says who requires whom; ``written``
        (from ``_written_types``) gives the types as the template wrote them."""
        names = {row.id: row.name for row in every}
        required_by: dict[str, list[str]] = {}
        for row in every:
            for required in row.requires:
                if required in names:
                    required_by.setdefault(names[required], []).append(row.name)
        hidden_by_type: dict[str, frozenset[str]] = {}
        views = []
        for row in rows:
            hidden = hidden_by_type.get(row.type)
            if hidden is None:
                hidden = frozenset()
                if row.type in self._ctx.registry:
                    schema = self._ctx.registry.plugin(row.type).properties_schema
                    hidden = frozenset(n for n, p in schema.items() if p.hidden)
                hidden_by_type[row.type] = hidden
            mapped = (written or {}).get(row.name)
            as_written = mapped[1] if mapped is not None and mapped[0] == row.type else None
            views.append(ResourceView.of(row, required_by.get(row.name, []), hidden, as_written))
        return views

    async def list_events(
        self, name_or_id: str, *, resource_name: str | None = None, after_id: int | None = None
    ) -> list[EventView]:
        stack = await self._find(name_or_id, include_deleted=True)
        records = await self._store.list_events(
            stack.id, resource_name=resource_name, after_id=after_id
        )
        return [EventView.of(record) for record in records]

    async def outputs(self, name_or_id: str) -> list[dict[str, Any]]:
        stack = await self._find(name_or_id)
        return [dict(value) for value in stack.outputs.values()]

    async def plan(
        self,
        name: str,
        template: TemplateInput,
        *,
        environments: Sequence[TemplateInput] = (),
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        show_nested: bool = False,
        converge: bool = False,
    ) -> list[PlannedChange]:
        """What applying the template to stack ``name`` would do; changes nothing.

        ``show_nested`` adds what would change inside the existing nested stacks of
        provider template resources (each such change names its ``stack_name``), where
        the properties they would get are known before applying. ``converge``: observe
        each resource first and decide as ``update_stack(..., converge=True)`` would (the
        same decision function), so drift shows as changes.
        """
        loaded = _load_template(template)
        environment = _merge(environments)
        try:
            stack: StackRecord | None = await self._find(name)
        except NotFound:
            stack = None
        identity = StackIdentity(name, stack.id if stack else "", self.project_id)
        previous = None
        if stack is not None and stack.raw_template_id is not None:
            previous = (await self._ctx.definitions.get(stack.raw_template_id)).parameters
        definition = self._prepare(
            loaded,
            environment,
            dict(files or {}),
            dict(parameters or {}),
            identity,
            previous_parameters=previous,
        )
        rows = await self._store.list_resources(stack.id) if stack is not None else []
        current = current_rows(rows, None)
        data = StoredData(
            {n: self._ctx.reference_id(r) for n, r in current.items()},
            {n: r.attr_data for n, r in current.items()},
        )
        changes: list[PlannedChange] = []
        for name_, resource in definition.resources.items():
            row = current.get(name_)
            if row is None or row.action == Action.INIT:
                changes.append(
                    PlannedChange(name_, resource.implementation_type, "CREATE", "new resource", [])
                )
                continue
            plugin = self._ctx.registry.plugin(resource.implementation_type)
            try:
                properties = resource.resolve_properties(data)
            except TemplateError:
                changes.append(
                    PlannedChange(
                        name_,
                        resource.implementation_type,
                        "UPDATE",
                        "depends on values known after apply",
                        [],
                    )
                )
                continue
            observed: Any = MISSING
            drifted: bool | None = None
            looks = row.status == Status.COMPLETE and row.type == resource.implementation_type
            if converge and stack is not None and looks and row.physical_resource_id:
                try:
                    observation = await self.engine.worker.observe_drift(stack, row)
                except ActionFailed as failed:
                    raise PluginError(f"plan --converge: {failed.reason}") from None
                observed = observation.for_decision
                drifted = observation.drift.status == DriftStatus.MODIFIED
            decision = decide_converging(
                resource_state(row),
                resource.implementation_type,
                properties,
                plugin.properties_schema,
                open_properties=plugin.open_properties,
                never_updates=plugin.never_updates,
                observed=observed,
                drifted=drifted,
                converges_inside=plugin.converges_inside,
                template_changed=template_changed(row, resource),
            )
            if decision.change == Change.UPDATE:
                # As Heat's preview: the plugin may decide replacement itself (what its
                # ``update`` would raise ReplacementRequired for).
                replacing = plugin.replacement_reason(applied_state(row), properties)
                if replacing is not None:
                    decision = dataclasses.replace(
                        decision, change=Change.REPLACE, reason=f"{name_}: {replacing}"
                    )
            hidden = {n for n, p in plugin.properties_schema.items() if p.hidden}
            baseline = dict(row.properties_data)
            if isinstance(observed, Mapping):
                baseline.update(observed)
            action = {
                Change.NOTHING: "NOTHING",
                Change.UPDATE: "UPDATE",
                Change.REPLACE: "REPLACE",
                Change.CREATE: "CREATE",
            }[decision.change]
            changes.append(
                PlannedChange(
                    name_,
                    resource.implementation_type,
                    action,
                    decision.reason,
                    list(decision.changed_properties),
                    property_changes={
                        prop: {
                            "old": MASK if prop in hidden else baseline.get(prop),
                            "new": MASK if prop in hidden else properties.get(prop),
                        }
                        for prop in decision.changed_properties
                    },
                )
            )
        for name_, row in current.items():
            if name_ not in definition.resources:
                changes.append(PlannedChange(name_, row.type, "DELETE", "not in the template", []))
        if show_nested:
            for name_, resource in definition.resources.items():
                row = current.get(name_)
                if resource.provider_template is None or row is None:
                    continue
                changes.extend(
                    await self._nested_plan(resource, row, environment, dict(files or {}), data)
                )
        return changes

    async def _nested_plan(
        self,
        resource: ResourceDefinition,
        row: ResourceRecord,
        environment: Environment,
        files: dict[str, str],
        data: StoredData,
    ) -> list[PlannedChange]:
        """The plan of the nested stack ``row`` made, as its owner's new template would
        converge it; nothing when it does not exist yet or its inputs are not known."""
        provider = resource.provider_template
        if provider is None or provider not in files or not row.physical_resource_id:
            return []
        try:
            nested = await self._store.get_stack(row.physical_resource_id)
            properties = resource.resolve_properties(data)
        except (NotFound, TemplateError):
            return []
        child = child_environment(environment, resource.name, resource.type, provider)
        changes = await self.plan(
            nested.name,
            Source(files[provider], provider),
            environments=[child.to_data()],
            files=files,
            parameters=properties,
            show_nested=True,
        )
        return [
            change if change.stack_name else dataclasses.replace(change, stack_name=nested.name)
            for change in changes
        ]

    # --- stored inputs, single resources, catalog (the REST API's needs) -------------------

    async def stored_inputs(self, name_or_id: str) -> TemplateRecord:
        """The template, environment, files and parameters the stack was last given."""
        stack = await self._find(name_or_id)
        if stack.raw_template_id is None:
            raise NotFound(f"stack {stack.name} has no template yet")
        return await self._store.get_template(stack.raw_template_id)

    async def get_resource(self, name_or_id: str, resource_name: str) -> ResourceView:
        """The current row of one resource (the newest when a replacement is under way)."""
        stack = await self._find(name_or_id, include_deleted=True)
        every = await self._store.list_resources(stack.id)
        row = self._newest_row(every, resource_name, stack.name)
        view = self._resource_views([row], every, await self._written_types(stack))[0]
        # As Heat's resource show: every attribute of the type, resolved.
        declared = await self._declared_attributes(stack, row)
        attributes = await self.engine.worker.every_attribute(stack, row, declared)
        return dataclasses.replace(view, attributes=attributes)

    async def _declared_attributes(self, stack: StackRecord, row: ResourceRecord) -> list[str]:
        """The attributes the resource's type declares as the template sees it (a provider
        template's outputs, for one); Heat's ``show`` attribute is left out."""
        schema = None
        if stack.raw_template_id is not None and not stack.deleted:
            with contextlib.suppress(NotFound, TemplateError):
                definition = await self._ctx.definitions.get(stack.raw_template_id)
                resource = definition.resources.get(row.name)
                schema = resource.schema if resource is not None else None
        if schema is not None:
            names = list(schema.attributes)
        elif row.type in self._ctx.registry:
            names = list(self._ctx.registry.plugin(row.type).attributes_schema)
        else:
            names = []
        return [name for name in names if name != "show"]

    @staticmethod
    def _newest_row(
        rows: Sequence[ResourceRecord], resource_name: str, stack_name: str
    ) -> ResourceRecord:
        named = [row for row in rows if row.name == resource_name]
        if not named:
            raise NotFound(f"stack {stack_name} has no resource {resource_name!r}")
        return max(named, key=lambda row: row.id)

    async def resource_metadata(self, name_or_id: str, resource_name: str) -> Any:
        """The resource's ``metadata`` section, resolved as the template says."""
        stack = await self._find(name_or_id)
        await self.get_resource(stack.id, resource_name)
        if stack.raw_template_id is None:
            return {}
        definition = await self._ctx.definitions.get(stack.raw_template_id)
        resource = definition.resources.get(resource_name)
        if resource is None or resource.metadata is None:
            return {}
        current = current_rows(await self._store.list_resources(stack.id), None)
        data = StoredData(
            {n: self._ctx.reference_id(r) for n, r in current.items()},
            {n: r.attr_data for n, r in current.items()},
        )
        try:
            return resource.resolve_metadata(data)
        except TemplateError as exc:
            raise Conflict(
                f"the metadata of {resource_name} needs values not known yet: {exc}"
            ) from exc

    async def mark_unhealthy(
        self, name_or_id: str, resource_name: str, unhealthy: bool, reason: str = ""
    ) -> None:
        """Heat's mark-unhealthy: CHECK_FAILED, so the next update replaces or re-applies it;
        ``unhealthy=False`` takes that back (CHECK_COMPLETE)."""
        stack = await self._find(name_or_id)
        if stack.status == Status.IN_PROGRESS:
            raise Conflict(
                f"stack {stack.name} is {stack.state}: mark {resource_name} once it settles"
            )
        row = self._newest_row(
            await self._store.list_resources(stack.id), resource_name, stack.name
        )
        if not unhealthy and row.action != Action.CHECK:
            return  # only a resource marked unhealthy (CHECK_FAILED) can be marked healthy
        status = Status.FAILED if unhealthy else Status.COMPLETE
        text = reason or ("marked unhealthy" if unhealthy else "marked healthy")
        done = await self._store.update_resource(
            row.id,
            row.atomic_key,
            {"action": str(Action.CHECK), "status": str(status), "status_reason": text},
            events=[
                NewEvent(
                    resource_name=row.name,
                    resource_type=row.type,
                    action=str(Action.CHECK),
                    status=str(status),
                    reason=text,
                    physical_resource_id=row.physical_resource_id,
                )
            ],
            stack_id=stack.id,
        )
        if done is None:
            raise Conflict(f"resource {resource_name} changed while being marked; try again")

    async def nested_stacks(self, name_or_id: str, depth: int) -> list[StackView]:
        """The stacks nested in this one, ``depth`` levels down (1: its own children)."""
        stack = await self._find(name_or_id, include_deleted=True)
        every = await self._store.list_stacks(self.project_id)
        children: dict[str, list[StackRecord]] = {}
        for record in every:
            if record.owner_id is not None:
                children.setdefault(record.owner_id, []).append(record)
        found: list[StackView] = []
        level = [stack.id]
        for _ in range(max(depth, 0)):
            records = [child for parent in level for child in children.get(parent, [])]
            found.extend([await self._view(record) for record in records])
            level = [record.id for record in records]
        return found

    async def validate(
        self,
        template: TemplateInput,
        *,
        environments: Sequence[TemplateInput] = (),
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        show_nested: bool = False,
    ) -> dict[str, Any]:
        """Heat's template validation: ``TemplateError`` for a problem, else its parameters
        (and, with ``show_nested``, those of its provider templates)."""
        loaded = _load_template(template)
        environment = _merge(environments)
        definition = self._prepare(
            loaded,
            environment,
            dict(files or {}),
            dict(parameters or {}),
            StackIdentity("validate", "", self.project_id),
        )
        return catalog.validation_result(
            loaded, definition, environment, files=files, show_nested=show_nested
        )

    def _schemas(self) -> dict[str, ResourceTypeSchema]:
        registry = self._ctx.registry
        return {
            name: schema
            for name in registry.type_names()
            if (schema := registry.lookup(name)) is not None
        }

    def resource_types(
        self,
        *,
        support_status: str | None = None,
        name: str | None = None,
        with_description: bool = False,
    ) -> list[Any]:
        return catalog.resource_types(
            self._schemas(),
            support_status=support_status,
            name=name,
            with_description=with_description,
        )

    def resource_type(self, type_name: str) -> ResourceTypeSchema:
        schema = self._ctx.registry.lookup(type_name)
        if schema is None:
            raise NotFound(self._ctx.registry.unknown_type_message(type_name))
        return schema

    async def snapshot(self, type_name: str) -> Snapshot:
        """The synchronizer's ``get_all`` of a type, limited to this project's stacks."""
        from converge.adapters.sql.entities import EntityStore

        snapshot = await EntityStore(self._sql()).snapshot(type_name)
        mine = {stack.id for stack in await self._store.list_stacks(self.project_id)}
        return Snapshot(
            [entity for entity in snapshot.entities if entity.stack_id in mine],
            dict(snapshot.seqs),
        )

    async def events_since(
        self, after_id: int, *, stack_id: str | None = None, limit: int = 500
    ) -> list[FeedEvent]:
        """The project's change feed: events of its stacks after ``after_id``, oldest first."""
        return await EventFeed(self._sql()).since(
            self.project_id, after_id, stack_id=stack_id, limit=limit
        )

    async def last_event_id(self) -> int:
        return await EventFeed(self._sql()).last_id()

    # --- API tokens ----------------------------------------------------------------------

    async def create_token(
        self, project_id: str, role: str = "member", description: str = ""
    ) -> tuple[str, TokenRecord]:
        """A new token for ``project_id``: the secret (shown once) and its stored record."""
        if role not in ROLES:
            raise InvalidRequest(f"invalid role {role!r}: use one of {', '.join(ROLES)}")
        if not _PROJECT.match(project_id):
            raise InvalidRequest(
                f"invalid project {project_id!r}: use letters, digits, '_', '-' and '.'"
            )
        secret = new_secret()
        record = await TokenStore(self._sql()).add(
            secret, project_id, role, description, self._ctx.clock.now()
        )
        return secret, record

    async def list_tokens(self, project_id: str | None = None) -> list[TokenRecord]:
        return await TokenStore(self._sql()).all(project_id)

    async def revoke_token(self, token_id: str) -> None:
        await TokenStore(self._sql()).revoke(token_id, self._ctx.clock.now())

    async def authenticate(self, secret: str) -> TokenRecord | None:
        """The live token with this secret, or None."""
        return await TokenStore(self._sql()).find(secret)

    # --- helpers -----------------------------------------------------------------------

    def _prepare(
        self,
        template: Template,
        environment: Environment,
        files: Mapping[str, str],
        parameters: Mapping[str, Any],
        identity: StackIdentity,
        *,
        previous_parameters: Mapping[str, Any] | None = None,
    ) -> StackDefinition:
        return prepare_definition(
            template,
            environment=environment,
            parameters=parameters,
            files=files,
            identity=identity,
            registry=self._ctx.registry,
            settings=self._ctx.settings,
            previous_parameters=previous_parameters,
            now=dt.datetime.fromtimestamp(self._ctx.clock.now(), dt.UTC),
        )

    async def _find(self, name_or_id: str, *, include_deleted: bool = False) -> StackRecord:
        try:
            return await self._store.find_stack(
                name_or_id, self.project_id, include_deleted=include_deleted
            )
        except NotFound:
            raise NotFound(f"stack {name_or_id!r} not found in {self._store.location}") from None

    async def _settle(self, stack_id: str, wait: bool) -> StackView:
        if wait:
            record = await self.engine.operations.wait_settled(stack_id)
        else:
            record = await self._store.get_stack(stack_id)
        return await self._view(record)

    def _started(self, started: StackRecord, action: Action) -> Operation:
        assert started.raw_template_id is not None  # every traversal start sets it
        operation = Operation(
            started.id,
            started.name,
            str(action),
            started.current_traversal,
            started.raw_template_id,
        )
        self._operations[started.id] = operation
        return operation

    async def _settle_operation(self, operation: Operation, wait: bool) -> StackView:
        if not wait:
            return await self._view(await self._store.get_stack(operation.stack_id))
        return await self.outcome(operation)

    def operation(self, stack_id: str) -> Operation | None:
        """The last create or update this handle started on the stack."""
        return self._operations.get(stack_id)

    async def outcome(self, operation: Operation) -> StackView:
        """Wait until ``operation`` settles (its own rollback included) and return the stack.

        Raises ``Superseded`` when a newer operation replaced it first: what it asked for
        was not carried out as such, whatever state the newer one leaves the stack in.
        """
        record = await self.engine.operations.wait_operation(
            operation.stack_id, operation.traversal_id, operation.template_id
        )
        if is_superseded(record, operation.template_id):
            record = await self.engine.operations.wait_settled(operation.stack_id)
            raise Superseded(
                f"the {operation.action.lower()} of stack {operation.stack_name} was "
                f"superseded by a newer operation (the stack is now {record.state}: "
                f"{record.status_reason})"
            )
        return await self._view(record)

    async def _view(self, stack: StackRecord) -> StackView:
        parameters: Mapping[str, Any] = {}
        description = ""
        if stack.raw_template_id is not None and not stack.deleted:
            try:
                definition = await self._ctx.definitions.get(stack.raw_template_id)
                # As Heat shows them: text, with the pseudo parameters of the stack
                # (OS::* for HOT, AWS::* for a CFN template).
                identity = StackIdentity(stack.name, stack.id, stack.project_id)
                parameters = {
                    **definition.parameter_texts(),
                    **pseudo_parameters(definition.version, identity),
                }
                description = definition.description
            except (NotFound, TemplateError):
                parameters = {}
        return StackView.of(stack, parameters, description)


def _load_template(template: TemplateInput) -> Template:
    if isinstance(template, Source):
        return load_template(template.text, template.filename)
    if isinstance(template, str):
        return load_template(template, "<template>")
    return template_from_data(template, filename="<template>")


def _merge(environments: Sequence[TemplateInput]) -> Environment:
    loaded = []
    for index, environment in enumerate(environments):
        if isinstance(environment, Source):
            loaded.append(load_environment(environment.text, environment.filename))
        elif isinstance(environment, str):
            loaded.append(load_environment(environment, f"<environment {index + 1}>"))
        else:
            loaded.append(environment_from_data(environment))
    return merge_environments(loaded)


def _check_stack_name(name: str) -> None:
    if not _STACK_NAME.match(name):
        raise InvalidRequest(
            f"invalid stack name {name!r}: it must start with a letter and contain only "
            "letters, digits, '_', '-' and '.' (at most 255 characters)"
        )


def _check_drift_policy(policy: str) -> None:
    if policy not in ("notify", "heal", "ignore"):
        raise InvalidRequest(f"invalid drift policy {policy!r}: use notify, heal or ignore")


def _bus(
    broker_url: str | None,
    namespace: str,
    roles: Collection[str],
    *,
    read_only: bool,
    settings: EngineSettings,
) -> Bus:
    """The in-process bus, or RabbitMQ's when a broker is given (``settings.host``: this
    machine's name for work bound to a host, by default its host name)."""
    if broker_url is not None:
        return _amqp_bus(broker_url, namespace, settings)
    if not read_only and "worker" not in roles:
        raise InvalidRequest(
            "without a broker the work is done in this process: it needs the worker role"
        )
    return LocalBus()


def _amqp_bus(url: str, namespace: str, settings: EngineSettings) -> Bus:
    """The RabbitMQ bus; aio-pika is an optional dependency (the ``rabbitmq`` extra)."""
    try:
        from converge.adapters.amqp_bus import AmqpBus
    except ImportError as exc:
        raise InvalidRequest(
            f"a broker URL needs the RabbitMQ bus: pip install 'converge[rabbitmq]' ({exc})"
        ) from exc
    wanted = settings.work_prefetch or settings.max_concurrent_checks
    prefetch = min(wanted, settings.max_concurrent_checks)
    return AmqpBus(url, namespace=namespace, host=settings.host, prefetch=prefetch)
