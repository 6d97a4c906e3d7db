"""The public Python API (asyncio): create, update, delete, cancel, wait, show and list.

    async with Converge.embedded("converge.db") as cv:
        stack = await cv.create_stack("demo", template_text)
        print(stack.stack_status)

Every mutating call returns at once with ``wait=False`` (so a second update can be started
while the first runs) or when the stack settles with ``wait=True``.

``Converge`` is composed of one mixin per concept over ``ConvergeBase`` (``base.py``):
``opening.py``, ``operations.py``, ``reading.py``, ``resources.py``, ``plans.py``,
``catalog.py``, ``feed.py``, ``tokens.py``; what a call is given is ``inputs.py``, how a
handle picks its bus ``buses.py``. This module composes the handle.
"""

from __future__ import annotations

from converge.adapters.sql.feed import FeedEvent
from converge.api.base import Operation
from converge.api.buses import _amqp_bus, _bus, reach_broker
from converge.api.catalog import CatalogMixin
from converge.api.feed import FeedMixin
from converge.api.inputs import Source, TemplateInput
from converge.api.opening import OpeningMixin
from converge.api.operations import HOOKS, OperationsMixin
from converge.api.plans import PlansMixin
from converge.api.resources import ResourcesMixin
from converge.api.tokens import ROLES, TokensMixin


class Converge(
    OpeningMixin,
    OperationsMixin,
    ResourcesMixin,
    PlansMixin,
    CatalogMixin,
    FeedMixin,
    TokensMixin,
):
    """A handle on converge: an engine in this process over a store and a bus."""

    def for_project(self, project_id: str) -> Converge:
        """The same engine seen from one project: every stack call is confined to it."""
        return Converge(self.engine, project_id=project_id)


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
    "reach_broker",
]
