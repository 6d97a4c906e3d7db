"""API tokens in the SQL store: a project and a role per token, only the secret's hash kept.

A token is 32 random bytes (``secrets.token_urlsafe``): with that much entropy a plain
SHA-256 is as strong as a slow KDF (nothing to guess), and it lets a request find its token
by an indexed equality lookup instead of trying every stored salt.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass

import sqlalchemy as sa

from converge.adapters.sql import tables as t
from converge.adapters.sql.store import SqlStore
from converge.errors import NotFound

api_token = sa.Table(
    "api_token",
    t.metadata,
    sa.Column("id", sa.String(16), primary_key=True),
    sa.Column("secret_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("project_id", sa.String(255), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=True),
)


@dataclass(frozen=True)
class TokenRecord:
    """A stored token, without its secret."""

    id: str
    project_id: str
    role: str
    description: str
    created_at: float
    revoked_at: float | None

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class TokenStore:
    """Token rows over the ``SqlStore``'s engine and threads."""

    def __init__(self, store: SqlStore) -> None:
        self._store = store

    async def add(
        self, secret: str, project_id: str, role: str, description: str, now: float
    ) -> TokenRecord:
        record = TokenRecord(uuid.uuid4().hex[:12], project_id, role, description, now, None)
        return await self._store._run(self._add, record, hash_secret(secret))

    def _add(self, record: TokenRecord, secret_hash: str) -> TokenRecord:
        with self._store._tx() as conn:
            conn.execute(
                api_token.insert().values(
                    id=record.id,
                    secret_hash=secret_hash,
                    project_id=record.project_id,
                    role=record.role,
                    description=record.description,
                    created_at=record.created_at,
                    revoked_at=None,
                )
            )
        return record

    async def find(self, secret: str) -> TokenRecord | None:
        """The live token with this secret, or None (unknown or revoked)."""
        return await self._store._run(self._find, hash_secret(secret))

    def _find(self, secret_hash: str) -> TokenRecord | None:
        with self._store._tx() as conn:
            row = conn.execute(
                sa.select(api_token).where(
                    api_token.c.secret_hash == secret_hash, api_token.c.revoked_at.is_(None)
                )
            ).one_or_none()
        return None if row is None else _record(row)

    async def all(self, project_id: str | None = None) -> list[TokenRecord]:
        return await self._store._run(self._all, project_id)

    def _all(self, project_id: str | None) -> list[TokenRecord]:
        query = sa.select(api_token).order_by(api_token.c.created_at, api_token.c.id)
        if project_id is not None:
            query = query.where(api_token.c.project_id == project_id)
        with self._store._tx() as conn:
            return [_record(row) for row in conn.execute(query)]

    async def revoke(self, token_id: str, now: float) -> None:
        await self._store._run(self._revoke, token_id, now)

    def _revoke(self, token_id: str, now: float) -> None:
        with self._store._tx() as conn:
            done = conn.execute(
                api_token.update()
                .where(api_token.c.id == token_id, api_token.c.revoked_at.is_(None))
                .values(revoked_at=now)
            ).rowcount
        if not done:
            raise NotFound(f"no live token with id {token_id!r} (see `converge token list`)")


def _record(row: sa.Row[tuple[object, ...]]) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        project_id=row.project_id,
        role=row.role,
        description=row.description,
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )
