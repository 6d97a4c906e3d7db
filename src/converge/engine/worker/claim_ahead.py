"""Claiming the next link ahead: a chain's next create, decided before the finish that makes
it ready and claimed by that finish's own transaction (``Store.finish_node``'s
``claim_next``), so that a link of a chain commits once instead of twice on PostgreSQL.

Only a create of a row never created (``INIT``) is claimed ahead, and only when its route
through the update phase is the plain one: no hook, no restriction, no heal leaving it
alone, no observation (an ``INIT`` row is never observed), its properties resolve from the
one report it waits for, and its type is known here; anything else is decided by its check
as usual. What the update phase would decide depends only on the stack's traversal, the row
and that report: the claim is a compare-and-swap on the row as it was read (``ahead``, read
with the previous finish), made only when the traversal is still the stack's current one
and the report is the row's first, so a claim that wins was decided on what the check would
have read. The continued check then acts at once (``Worker.check``).

The row is marked as this process's work (``_acting``) before the finish is sent, as any
claim is; a claim that did not happen releases the mark. A claim whose check will not act
(not taken here, the process stopping; or its traversal's graph gone) is given back: the
row is put back as it was read and handed to the stack's current traversal. A process
killed in between leaves the claim as it leaves any other: taken over once it is gone.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from converge.core.states import Action, Status
from converge.core.template import ResourceDefinition
from converge.core.traversal import GraphNode, TraversalGraph
from converge.engine.inputs import ReportedData
from converge.engine.worker.base import _Acting
from converge.engine.worker.rows import _is_paused
from converge.errors import NotFound, TemplateError
from converge.records import (
    CheckInputs,
    ClaimAhead,
    NewEvent,
    Report,
    ResourceRecord,
    StackRecord,
)
from converge.resources.base import ResourcePlugin


@dataclass(eq=False)
class AheadClaim:
    """A create decided ahead: what ``_act`` needs, the claim's columns and events, and
    this process's mark on the row. ``claimed`` and ``inputs`` are set once the finish
    claimed it: the row as claimed, and the inputs handed to the continued check (the one
    check that may act on the claim, known by them)."""

    node: GraphNode
    row: ResourceRecord
    resource: ResourceDefinition
    plugin: ResourcePlugin
    properties: Mapping[str, Any]
    requires: frozenset[int]
    needed: frozenset[str]
    changes: Mapping[str, Any]
    events: list[NewEvent]
    acting: _Acting
    claimed: ResourceRecord | None = None
    inputs: CheckInputs | None = None

    def to_store(self) -> ClaimAhead:
        return ClaimAhead(self.row.id, self.row.atomic_key, self.changes, self.events)


@dataclass(frozen=True)
class AheadRow:
    """The row of the link after next, read with a finish (``read_ahead``): what the
    continued check's own finish may claim ahead. Kept by the node whose finish uses it."""

    traversal: str
    node: GraphNode
    row: ResourceRecord


def reported(sender: GraphNode, report: Mapping[str, Any]) -> list[Report]:
    """The successor's reports: the finish's own one, as it comes back from the store
    (through JSON, as the store writes it)."""
    data = json.loads(json.dumps(report))
    return [Report(sender.resource_id, sender.is_update, data)]


def plain_create(
    stack: StackRecord,
    graph: TraversalGraph,
    node: GraphNode,
    row: ResourceRecord,
    resource: ResourceDefinition | None,
    reports: list[Report],
    plugin_of: Callable[[str], ResourcePlugin],
    host: str | None,
) -> tuple[ResourceDefinition, ResourcePlugin, Mapping[str, Any], ReportedData] | None:
    """The definition, plugin, properties and inputs of a row whose update phase can only
    be a plain create (see the module), or None. ``plugin_of``: the registry's lookup."""
    if (
        resource is None
        or not node.is_update
        or stack.action == Action.CHECK
        or row.action != Action.INIT
        or row.status != Status.COMPLETE
        or row.engine_id is not None
        or row.replaced_by is not None
        or row.physical_resource_id
        or row.host not in (None, host)
        or graph.host_of(node) not in (None, host)
        or _is_paused(row, stack.current_traversal)
        or "pre-create" in resource.hooks
        or stack.converge_names is not None
    ):
        return None
    data = ReportedData(reports)
    try:
        properties = resource.resolve_properties(data)
        plugin = plugin_of(resource.implementation_type)
    except (TemplateError, NotFound):
        return None
    return resource, plugin, properties, data
