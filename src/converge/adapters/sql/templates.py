"""Templates in the SQL store: each operation stores its own (template, environment,
files, parameters).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from converge.adapters.sql import tables as t
from converge.adapters.sql.connection import StoreBase
from converge.adapters.sql.records import inserted_id
from converge.errors import NotFound
from converge.records import NewTemplate, TemplateRecord


class TemplatesMixin(StoreBase):
    """Templates: what an operation was asked to converge to, stored with its inputs."""

    async def add_template(
        self,
        stack_id: str,
        template: Mapping[str, Any],
        environment: Mapping[str, Any],
        files: Mapping[str, str],
        parameters: Mapping[str, Any],
    ) -> int:
        return await self._run(
            self._add_template, stack_id, template, environment, files, parameters
        )

    def _add_template(
        self,
        stack_id: str,
        template: Mapping[str, Any],
        environment: Mapping[str, Any],
        files: Mapping[str, str],
        parameters: Mapping[str, Any],
    ) -> int:
        with self._tx() as conn:
            return self._insert_template(
                conn, stack_id, NewTemplate(template, environment, files, parameters)
            )

    def _insert_template(self, conn: Connection, stack_id: str, new: NewTemplate) -> int:
        result = conn.execute(
            t.raw_template.insert().values(
                stack_id=stack_id,
                template=dict(new.template),
                environment=dict(new.environment),
                files=dict(new.files),
                parameters=dict(new.parameters),
                created_at=self._clock(),
            )
        )
        return inserted_id(result)

    async def get_template(self, template_id: int) -> TemplateRecord:
        return await self._read(self._get_template, template_id)

    def _get_template(self, template_id: int) -> TemplateRecord:
        with self._tx() as conn:
            row = conn.execute(
                sa.select(t.raw_template).where(t.raw_template.c.id == template_id)
            ).one_or_none()
        if row is None:
            raise NotFound(f"template {template_id} not found")
        return TemplateRecord(
            id=row.id,
            stack_id=row.stack_id,
            template=row.template,
            environment=row.environment,
            files=row.files,
            parameters=row.parameters,
        )
