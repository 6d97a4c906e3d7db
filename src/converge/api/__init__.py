"""The public Python API (asyncio): create, update, delete, cancel, wait, show and list.

    async with Converge.embedded("converge.db") as cv:
        stack = await cv.create_stack("demo", template_text)
        print(stack.stack_status)

Every mutating call returns at once with ``wait=False`` (so a second update can be started
while the first runs) or when the stack settles with ``wait=True``.
"""

from __future__ import annotations

import re

from converge.adapters.sql.feed import FeedEvent
from converge.adapters.sql.tokens import TokenRecord, TokenStore, new_secret
from converge.api.base import Operation
from converge.api.buses import _amqp_bus, _bus
from converge.api.catalog import CatalogMixin
from converge.api.feed import FeedMixin
from converge.api.inputs import (
    Source,
    TemplateInput,
)
from converge.api.opening import OpeningMixin
from converge.api.operations import HOOKS, OperationsMixin
from converge.api.plans import PlansMixin
from converge.api.resources import ResourcesMixin
from converge.errors import (
    InvalidRequest,
)

_PROJECT = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
ROLES = ("admin", "member", "reader")


class Converge(OpeningMixin, OperationsMixin, ResourcesMixin, PlansMixin, CatalogMixin, FeedMixin):
    """A handle on converge: an engine in this process over a store and a bus."""

    def for_project(self, project_id: str) -> Converge:
        """The same engine seen from one project: every stack call is confined to it."""
        return Converge(self.engine, project_id=project_id)

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
