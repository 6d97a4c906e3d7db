"""Nested stacks: the engine side of provider template resources.

A resource whose type is a template file owns a stack of its own (``owner_id`` on the
stack row). Creating or updating the resource converges that stack to the template,
taken from the owner's current files map, with the resource's properties as parameters;
deleting the resource deletes the stack. The nested stack is an ordinary stack: its own
traversals, events, drift and outputs, in the same store, run by any engine.

The nested stack is named after the resource's physical name (owner stack, resource,
short id), so a create interrupted after the stack was made finds it again instead of
making a second one. Its operation's traversal id is derived from the owner's traversal
and what it converges to, so a repeated check of the owner's resource in the same
traversal (a re-sent message, a claim taken over from a process thought dead) finds that
operation started, or done, and waits for it instead of starting it again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from converge.core.states import Action, Status
from converge.core.template import (
    StackIdentity,
    environment_from_data,
    load_template,
    template_from_data,
)
from converge.core.template.nested import MAX_NESTING_DEPTH, child_environment
from converge.engine.context import EngineContext
from converge.engine.operations import StackOperations
from converge.engine.validation import prepare_definition
from converge.errors import Conflict, NotFound, PermanentFailure, TemplateError
from converge.records import StackRecord
from converge.resources.base import NestedStackState, ResourceContext

log = logging.getLogger("converge.engine.nested")


class NestedStackService:
    """``NestedStacks`` for the plugins of one engine process."""

    def __init__(self, ctx: EngineContext, operations: StackOperations) -> None:
        self.ctx = ctx
        self.operations = operations

    async def apply(
        self,
        rctx: ResourceContext,
        properties: Mapping[str, Any],
        stack_id: str | None,
        *,
        template: Mapping[str, Any] | None = None,
    ) -> str:
        owner = await self.ctx.store.get_stack(rctx.stack_id)
        if owner.raw_template_id is None:
            raise PermanentFailure(f"stack {owner.name} has no template")
        definition = await self.ctx.definitions.get(owner.raw_template_id)
        resource = definition.resources.get(rctx.resource_name)
        if resource is None:
            raise PermanentFailure(f"{rctx.resource_name} is not in stack {owner.name}")
        provider = resource.provider_template
        if template is None and provider is None:
            raise PermanentFailure(f"{rctx.resource_name} is not a provider template resource")
        depth = await self._depth(owner) + 1
        if depth > MAX_NESTING_DEPTH:
            raise PermanentFailure(
                f"nested stacks nest deeper than {MAX_NESTING_DEPTH} levels "
                f"(does {provider or resource.type!r} use itself?)"
            )
        record = await self.ctx.store.get_template(owner.raw_template_id)
        if template is None and provider not in record.files:
            raise PermanentFailure(f"provider template {provider!r} is not in the files map")
        existing = await self._existing(owner, rctx.physical_name, stack_id)
        child_id = existing.id if existing is not None else str(uuid.uuid4())
        # Only what the template sets is passed (Heat's child_params): the nested template's
        # own defaults and the environment's parameter_defaults apply to the rest.
        written = resource.properties if isinstance(resource.properties, Mapping) else {}
        parameters = {
            name: value
            for name, value in properties.items()
            if value is not None and (template is not None or name in written)
        }
        source = provider or f"{rctx.resource_name} ({resource.type})"
        try:
            loaded = (
                load_template(record.files[provider], provider)
                if template is None and provider is not None
                else template_from_data(template or {}, source)
            )
            environment = child_environment(
                environment_from_data(record.environment),
                resource.name,
                resource.type,
                provider or "",
            )
            child = prepare_definition(
                loaded,
                environment=environment,
                parameters=parameters,
                files=record.files,
                identity=StackIdentity(rctx.physical_name, child_id, owner.project_id),
                registry=self.ctx.registry,
                settings=self.ctx.settings,
                depth=depth,
            )
        except TemplateError as exc:
            raise PermanentFailure(f"nested stack {rctx.physical_name}: {exc}") from exc
        traversal_id = child_traversal_id(
            owner.current_traversal,
            rctx.physical_name,
            {
                "template": loaded.data,
                "environment": environment.to_data(),
                "parameters": parameters,
                "converge": rctx.converge,
            },
        )
        if existing is not None and existing.current_traversal == traversal_id:
            # This traversal of the owner already started this very operation (and it may
            # be done): the check is a repeat. Starting it again would converge the whole
            # nested stack once more (an UPDATE of every resource in it).
            log.info(
                "nested stack already converging for this traversal",
                extra={"stack": owner.name, "resource": rctx.resource_name, "nested": child_id},
            )
            return child_id
        if existing is not None and await self.ctx.store.reported_senders(traversal_id):
            # That operation ran and another superseded it since (an operation on the
            # nested stack itself): its leftover reports must not count for a new run.
            traversal_id = uuid.uuid4().hex
        remaining = rctx.remaining()
        timeout_mins = None if remaining is None else max(remaining, 1.0) / 60
        if existing is None:
            await self.ctx.store.create_stack(
                rctx.physical_name,
                owner.project_id,
                action=Action.CREATE,
                # The owner's traversal rolls back; a nested stack only converges.
                disable_rollback=True,
                timeout_mins=timeout_mins,
                drift_policy=owner.drift_policy,
                stack_id=child_id,
                owner_id=owner.id,
            )
            action = Action.CREATE
        else:
            # An interrupted create is resumed as a create; anything else is an update.
            resumed = existing.action == Action.CREATE and existing.status != Status.COMPLETE
            action = Action.CREATE if resumed else Action.UPDATE
        template_id = await self.ctx.store.add_template(
            child_id, loaded.data, environment.to_data(), record.files, parameters
        )
        self.ctx.definitions.put(template_id, child)
        await self.operations.converge(
            child_id,
            template_id,
            child,
            action,
            converge=rctx.converge,
            traversal_id=traversal_id,
            # The owner's newer traversal may want back a nested stack an older one was
            # deleting: the owner's graph decides, as for any of its resources.
            supersedes_delete=True,
            settings={"timeout_mins": timeout_mins},
        )
        log.info(
            "nested stack started",
            extra={"stack": owner.name, "resource": rctx.resource_name, "nested": child_id},
        )
        return child_id

    async def wait(self, stack_id: str) -> NestedStackState:
        try:
            record = await self.operations.wait_settled(stack_id)
        except NotFound as exc:
            raise PermanentFailure(f"nested stack {stack_id} vanished") from exc
        return _state(record)

    async def delete(self, rctx: ResourceContext, stack_id: str | None) -> NestedStackState | None:
        stack = await self._of_resource(rctx, stack_id)
        if stack is None:
            return None
        await self.operations.delete(stack)
        return _state(await self.operations.wait_settled(stack.id))

    async def preempt(self, rctx: ResourceContext, stack_id: str | None) -> None:
        """Cancel, without rollback, the operation running in the resource's nested stack
        and below it: a newer operation of the owner supersedes it (Heat's handle_preempt)."""
        stack = await self._of_resource(rctx, stack_id)
        if stack is None or stack.status != Status.IN_PROGRESS:
            return
        try:
            await self.operations.cancel_update(stack, rollback=False)
        except Conflict:
            return  # not cancellable (a delete or a rollback): it finishes on its own
        log.info(
            "nested stack preempted",
            extra={"stack": rctx.stack_name, "resource": rctx.resource_name, "nested": stack.id},
        )

    async def find(self, rctx: ResourceContext, stack_id: str | None) -> NestedStackState | None:
        stack = await self._of_resource(rctx, stack_id)
        return None if stack is None else _state(stack)

    async def _of_resource(self, rctx: ResourceContext, stack_id: str | None) -> StackRecord | None:
        if stack_id is not None:
            return await self._live(stack_id)
        try:
            owner = await self.ctx.store.get_stack(rctx.stack_id)
            found = await self.ctx.store.find_stack(rctx.physical_name, owner.project_id)
        except NotFound:
            return None
        return found if found.owner_id == owner.id else None

    async def _live(self, stack_id: str) -> StackRecord | None:
        try:
            stack = await self.ctx.store.get_stack(stack_id)
        except NotFound:
            return None
        return None if stack.deleted else stack

    async def _existing(
        self, owner: StackRecord, name: str, stack_id: str | None
    ) -> StackRecord | None:
        """The nested stack to update: the one recorded, or one an interrupted create made."""
        if stack_id is not None:
            stack = await self._live(stack_id)
            if stack is not None:
                return stack
        try:
            found = await self.ctx.store.find_stack(name, owner.project_id)
        except NotFound:
            return None
        if found.owner_id != owner.id:
            raise PermanentFailure(
                f"a stack named {name} exists and is not a nested stack of {owner.name}"
            )
        return found

    async def _depth(self, stack: StackRecord) -> int:
        depth = 0
        while stack.owner_id is not None and depth <= MAX_NESTING_DEPTH:
            try:
                stack = await self.ctx.store.get_stack(stack.owner_id)
            except NotFound:
                break
            depth += 1
        return depth


def child_traversal_id(owner_traversal: str, child_name: str, target: Mapping[str, Any]) -> str:
    """The id of the nested stack's traversal that the owner's traversal starts to converge
    it to ``target``: the same for a repeated check, another for another traversal of the
    owner or another target (each step of a group's rolling update)."""
    digest = hashlib.sha256(
        json.dumps(target, sort_keys=True, separators=(",", ":"), default=str).encode()
    ).hexdigest()
    return uuid.uuid5(uuid.NAMESPACE_URL, f"{owner_traversal}/{child_name}/{digest}").hex


def _state(stack: StackRecord) -> NestedStackState:
    outputs = {
        name: entry.get("output_value") if isinstance(entry, Mapping) else None
        for name, entry in stack.outputs.items()
    }
    return NestedStackState(
        stack_id=stack.id,
        stack_name=stack.name,
        state=stack.state,
        reason=stack.status_reason,
        outputs=outputs,
        project_id=stack.project_id,
    )
