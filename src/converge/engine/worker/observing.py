"""What the worker asks a plugin about a resource's reality: its observed essence and drift
(and what the update decision compares with the template), and every attribute a resource
declares (Heat's resource show)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from converge.core.decide import MISSING
from converge.core.drift import Drift, DriftStatus, compare
from converge.core.states import Action, Status
from converge.engine.context import applied_state
from converge.engine.failure import ActionFailed
from converge.engine.worker.plugin_calls import PluginCallsMixin, _Replace, log
from converge.engine.worker.rows import _hidden_properties, _jsonable
from converge.records import ResourceRecord, StackRecord


@dataclass(frozen=True)
class Observation:
    """A resource's observed reality, three ways."""

    essence: Mapping[str, Any] | None  # hashable core of reality; None: gone
    drift: Drift
    # What ``decide_update`` compares: live properties, None (gone) or MISSING (in sync).
    for_decision: Any


class ObservingMixin(PluginCallsMixin):
    """Observing a resource's reality through its plugin."""

    async def every_attribute(
        self, stack: StackRecord, row: ResourceRecord, declared: Collection[str]
    ) -> dict[str, Any]:
        """Every ``declared`` attribute of the resource, resolved (Heat's resource show):
        those a template asked for are cached on the row, the rest asked of the plugin. An
        attribute the plugin cannot give now is left out."""
        attributes = dict(row.attr_data)
        missing = set(declared) - set(attributes)
        if not missing or row.physical_resource_id is None or row.type not in self.ctx.registry:
            return attributes
        plugin = self.ctx.registry.plugin(row.type)
        try:
            ctx = self._context(stack, row)
            fetched = await self._run(
                stack, row, plugin.attributes, ctx, applied_state(row), missing
            )
        except (ActionFailed, _Replace) as exc:
            log.info("attributes not available", extra={"resource": row.name, "error": str(exc)})
            return attributes
        return {**attributes, **_jsonable(fetched)}

    async def observe_drift(self, stack: StackRecord, row: ResourceRecord) -> Observation:
        """Observe a resource's reality: its essence, its drift, and what decisions compare.

        Raises ``ActionFailed`` when the plugin cannot say (error or timeout).
        """
        plugin = self.ctx.registry.plugin(row.type)
        try:
            live = await self._run(
                stack, row, plugin.observe, self._context(stack, row), applied_state(row)
            )
        except _Replace as exc:
            raise ActionFailed(f"Error: resources.{row.name}: {exc}") from exc
        except ActionFailed as failed:
            raise ActionFailed(f"{failed.reason} (while observing its reality)") from failed
        essence = None if live is None else dict(plugin.essence(live))
        hidden_values = await self.ctx.hidden_values(row.current_template_id)
        drift = compare(
            plugin.essence(row.properties_data),
            essence,
            _hidden_properties(plugin),
            hidden_values.conceals,
        )
        if drift.status == DriftStatus.IN_SYNC:
            return Observation(essence, drift, MISSING)  # decide as without reality
        if live is None:
            return Observation(None, drift, None)
        # The decision compares properties with properties: the live values of the
        # properties the type declares (the essence may hold derived fields instead).
        observed = {
            key: value
            for key, value in live.items()
            if plugin.open_properties or key in plugin.properties_schema
        }
        return Observation(essence, drift, observed)

    async def _drift_of(self, stack: StackRecord, row: ResourceRecord) -> Drift:
        return (await self.observe_drift(stack, row)).drift

    def _observes(self, stack: StackRecord, row: ResourceRecord, desired_type: str) -> bool:
        """Does this traversal compare this resource with its observed reality?"""
        if not (stack.converge or self.ctx.settings.observe_on_update):
            return False
        if stack.converge_names is not None and row.name not in stack.converge_names:
            return False  # a heal observes only the drifted resources
        if row.action == Action.INIT or row.physical_resource_id is None:
            return False  # nothing real yet
        # Failed, interrupted or retyped: the usual rules decide.
        return row.status == Status.COMPLETE and row.type == desired_type
