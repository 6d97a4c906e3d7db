"""API tokens: made for a project with a role (the secret shown once), listed, revoked,
and a secret authenticated."""

from __future__ import annotations

import re

from converge.adapters.sql.tokens import TokenRecord, TokenStore, new_secret
from converge.api.base import ConvergeBase
from converge.errors import InvalidRequest

_PROJECT = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
ROLES = ("admin", "member", "reader")


class TokensMixin(ConvergeBase):
    """The REST API's tokens."""

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
