"""What every part of the API runs on: the engine, its store and context, the project a
handle is confined to, and the operations it started (an ``Operation`` tells whether
one still stands); how a stack is found, a definition prepared and a stack shown."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from converge.adapters.sql.store import SqlStore
from converge.core.states import Action
from converge.core.template import (
    Environment,
    StackDefinition,
    StackIdentity,
    Template,
    pseudo_parameters,
)
from converge.engine.operations import is_superseded
from converge.engine.runtime import Engine
from converge.engine.validation import prepare_definition
from converge.errors import NotFound, Superseded, TemplateError
from converge.records import StackRecord
from converge.views import StackView


@dataclass(frozen=True)
class Operation:
    """A create or update this handle started: what tells whether it still stands."""

    stack_id: str
    stack_name: str
    action: str
    traversal_id: str
    template_id: int


class ConvergeBase:
    """A handle on converge's engine: what each concept of the API (opening, stack
    operations, reading, ...) builds on. Each is a mixin over this base; ``Converge``
    (``converge/api/__init__.py``) is all of them."""

    def __init__(self, engine: Engine, *, project_id: str | None = None) -> None:
        self.engine = engine
        self._ctx = engine.ctx
        self._store = engine.ctx.store
        self._operations: dict[str, Operation] = {}  # the last one started, by stack id
        self._project_id = project_id or engine.ctx.settings.project_id

    def _sql(self) -> SqlStore:
        """The SQL store this API was opened on: tokens, the event feed and the baseline
        snapshot are read through it directly (they are the API's, not the engine's)."""
        if not isinstance(self._store, SqlStore):
            raise TypeError(f"converge.api needs a SqlStore, not {type(self._store).__name__}")
        return self._store

    @property
    def project_id(self) -> str:
        return self._project_id

    def _prepare(
        self,
        template: Template,
        environment: Environment,
        files: Mapping[str, str],
        parameters: Mapping[str, Any],
        identity: StackIdentity,
        *,
        previous_parameters: Mapping[str, Any] | None = None,
    ) -> StackDefinition:
        return prepare_definition(
            template,
            environment=environment,
            parameters=parameters,
            files=files,
            identity=identity,
            registry=self._ctx.registry,
            settings=self._ctx.settings,
            previous_parameters=previous_parameters,
            now=dt.datetime.fromtimestamp(self._ctx.clock.now(), dt.UTC),
        )

    async def _find(self, name_or_id: str, *, include_deleted: bool = False) -> StackRecord:
        try:
            return await self._store.find_stack(
                name_or_id, self.project_id, include_deleted=include_deleted
            )
        except NotFound:
            raise NotFound(f"stack {name_or_id!r} not found in {self._store.location}") from None

    async def _settle(self, stack_id: str, wait: bool) -> StackView:
        if wait:
            record = await self.engine.operations.wait_settled(stack_id)
        else:
            record = await self._store.get_stack(stack_id)
        return await self._view(record)

    def _started(self, started: StackRecord, action: Action) -> Operation:
        assert started.raw_template_id is not None  # every traversal start sets it
        operation = Operation(
            started.id,
            started.name,
            str(action),
            started.current_traversal,
            started.raw_template_id,
        )
        self._operations[started.id] = operation
        return operation

    async def _settle_operation(self, operation: Operation, wait: bool) -> StackView:
        if not wait:
            return await self._view(await self._store.get_stack(operation.stack_id))
        return await self.outcome(operation)

    def operation(self, stack_id: str) -> Operation | None:
        """The last create or update this handle started on the stack."""
        return self._operations.get(stack_id)

    async def outcome(self, operation: Operation) -> StackView:
        """Wait until ``operation`` settles (its own rollback included) and return the stack.

        Raises ``Superseded`` when a newer operation replaced it first: what it asked for
        was not carried out as such, whatever state the newer one leaves the stack in.
        """
        record = await self.engine.operations.wait_operation(
            operation.stack_id, operation.traversal_id, operation.template_id
        )
        if is_superseded(record, operation.template_id):
            record = await self.engine.operations.wait_settled(operation.stack_id)
            raise Superseded(
                f"the {operation.action.lower()} of stack {operation.stack_name} was "
                f"superseded by a newer operation (the stack is now {record.state}: "
                f"{record.status_reason})"
            )
        return await self._view(record)

    async def _view(self, stack: StackRecord) -> StackView:
        parameters: Mapping[str, Any] = {}
        description = ""
        if stack.raw_template_id is not None and not stack.deleted:
            try:
                definition = await self._ctx.definitions.get(stack.raw_template_id)
                # As Heat shows them: text, with the pseudo parameters of the stack
                # (OS::* for HOT, AWS::* for a CFN template).
                identity = StackIdentity(stack.name, stack.id, stack.project_id)
                parameters = {
                    **definition.parameter_texts(),
                    **pseudo_parameters(definition.version, identity),
                }
                description = definition.description
            except (NotFound, TemplateError):
                parameters = {}
        return StackView.of(stack, parameters, description)
