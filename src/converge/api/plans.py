"""Plans: what applying a template to a stack would do (Heat's preview), decided as an
update would decide it, with the nested stacks' plans when asked; changes nothing."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from converge.api.base import ConvergeBase
from converge.api.inputs import Source, TemplateInput, _load_template, _merge
from converge.core.decide import MISSING, Change
from converge.core.drift import MASK, DriftStatus
from converge.core.states import Action, Status
from converge.core.template import Environment, ResourceDefinition, StackIdentity
from converge.core.template.nested import child_environment
from converge.engine.context import applied_state
from converge.engine.inputs import StoredData
from converge.engine.operations import current_rows
from converge.engine.worker import ActionFailed
from converge.engine.worker.rows import converging_decision
from converge.errors import NotFound, PluginError, TemplateError
from converge.records import ResourceRecord, StackRecord
from converge.views import PlannedChange


class PlansMixin(ConvergeBase):
    """What an update would change, without changing it."""

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
            decision = converging_decision(
                row, resource, plugin, properties, observed=observed, drifted=drifted
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
