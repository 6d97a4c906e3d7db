"""The public Python API (asyncio): create, update, delete, cancel, wait, show and list.

    async with Converge.embedded("converge.db") as cv:
        stack = await cv.create_stack("demo", template_text)
        print(stack.stack_status)

Every mutating call returns at once with ``wait=False`` (so a second update can be started
while the first runs) or when the stack settles with ``wait=True``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Any

from converge import catalog
from converge.adapters.sql.feed import EventFeed, FeedEvent
from converge.adapters.sql.tokens import TokenRecord, TokenStore, new_secret
from converge.api.base import Operation
from converge.api.buses import _amqp_bus, _bus
from converge.api.inputs import (
    Source,
    TemplateInput,
    _load_template,
    _merge,
)
from converge.api.opening import OpeningMixin
from converge.api.operations import HOOKS, OperationsMixin
from converge.api.resources import ResourcesMixin
from converge.core.baseline import Snapshot
from converge.core.decide import MISSING, Change, decide_converging
from converge.core.drift import MASK, DriftStatus
from converge.core.schema import ResourceTypeSchema
from converge.core.states import Action, Status
from converge.core.template import (
    Environment,
    ResourceDefinition,
    StackIdentity,
)
from converge.core.template.nested import child_environment
from converge.engine.context import applied_state
from converge.engine.inputs import StoredData
from converge.engine.operations import (
    current_rows,
)
from converge.engine.worker import ActionFailed, resource_state, template_changed
from converge.errors import (
    InvalidRequest,
    NotFound,
    PluginError,
    TemplateError,
)
from converge.records import (
    ResourceRecord,
    StackRecord,
)
from converge.views import PlannedChange

_PROJECT = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
ROLES = ("admin", "member", "reader")


class Converge(OpeningMixin, OperationsMixin, ResourcesMixin):
    """A handle on converge: an engine in this process over a store and a bus."""

    def for_project(self, project_id: str) -> Converge:
        """The same engine seen from one project: every stack call is confined to it."""
        return Converge(self.engine, project_id=project_id)

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


# Imported from here by other modules and tests, from before the API was split by concept.
__all__ = [
    "HOOKS",
    "ROLES",
    "Converge",
    "FeedEvent",
    "Operation",
    "Source",
    "TemplateInput",
    "_amqp_bus",
    "_bus",
]
