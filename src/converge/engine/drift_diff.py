"""The plugin's diffs of a drifted resource, for people reading its drift.

Drift is recorded from essences, where a file's content is only a digest; a diff needs the
content itself, so the resource is observed again when a diff is asked for. What is shown
is reality *now*: a resource that is back in sync by then has no diff. A text that would
show a hidden value (a hidden property's or a hidden parameter's) is left out.
"""

from __future__ import annotations

from collections.abc import Mapping

from converge.core.drift import DriftStatus
from converge.core.hidden import HiddenValues
from converge.engine.context import EngineContext
from converge.engine.worker import ActionFailed, Worker
from converge.records import ResourceRecord, StackRecord
from converge.resources.base import ResourcePlugin


async def drift_diffs(
    ctx: EngineContext, worker: Worker, stack: StackRecord, row: ResourceRecord
) -> dict[str, str]:
    """Short texts of how ``row``'s reality differs from what was applied, keyed by the
    drift detail field each explains; {} when its type offers none or it cannot be seen."""
    if row.drift_status != DriftStatus.MODIFIED or row.type not in ctx.registry:
        return {}
    plugin = ctx.registry.plugin(row.type)
    if type(plugin).drift_diff is ResourcePlugin.drift_diff:
        return {}  # no diffs from this type: do not observe for nothing
    try:
        observation = await worker.observe_drift(stack, row)
    except ActionFailed:
        return {}
    live = observation.for_decision
    if not isinstance(live, Mapping):
        return {}  # in sync again, or gone
    applied = row.properties_data
    stack_secrets = await ctx.hidden_values(row.current_template_id)
    hidden = [name for name, prop in plugin.properties_schema.items() if prop.hidden]
    type_secrets = HiddenValues.of([applied.get(n) for n in hidden] + [live.get(n) for n in hidden])
    if stack_secrets.conceals(dict(applied)) or stack_secrets.conceals(dict(live)):
        return {}
    return {
        name: text
        for name, text in plugin.drift_diff(applied, live).items()
        if text and not (type_secrets.conceals(text) or stack_secrets.conceals(text))
    }
