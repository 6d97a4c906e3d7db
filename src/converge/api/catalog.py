"""The catalog as a handle sees it: a template validated (Heat's validate), and the
resource types its registry knows (list and show)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from converge import catalog
from converge.api.base import ConvergeBase
from converge.api.inputs import TemplateInput, _load_template, _merge
from converge.core.schema import ResourceTypeSchema
from converge.core.template import StackIdentity
from converge.errors import NotFound


class CatalogMixin(ConvergeBase):
    """Templates validated and resource types described; no stack involved."""

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
