"""Stack operations: create, update (Heat's PUT and PATCH), delete, cancel an update,
clear a hook, check, and wait for a stack to settle. Each returns at once with
``wait=False`` or when the stack settles with ``wait=True``."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from converge.api.base import ConvergeBase
from converge.api.inputs import (
    TemplateInput,
    _check_drift_policy,
    _check_stack_name,
    _load_template,
    _merge,
)
from converge.core.states import Action, Status
from converge.core.template import (
    Environment,
    StackDefinition,
    StackIdentity,
    environment_from_data,
    template_from_data,
)
from converge.engine.operations import stack_event
from converge.errors import Conflict, InvalidRequest, NotFound
from converge.messages import CheckResource
from converge.records import NewTemplate, StackRecord, TemplateRecord
from converge.views import StackView

_TEMPLATE_READ_ATTEMPTS = 20
HOOKS = ("pre-create", "pre-update", "pre-delete", "post-create", "post-update", "post-delete")


class OperationsMixin(ConvergeBase):
    """What changes a stack: each call starts an operation of the engine."""

    async def hosts_needed(
        self,
        name_or_id: str | None,
        template: TemplateInput | None = None,
        environments: Sequence[TemplateInput] = (),
    ) -> dict[str, list[str]]:
        """The hosts whose own workers an operation on the stack needs, each with the names
        of the resources bound to it (``Local::*``: their work runs only there): what the
        rows of the stack and of its nested stacks record, and this host for the resources
        ``template`` adds (not in the stack yet) of a type bound to the host that makes
        them. Conditions are not evaluated: a resource they leave out may be counted."""
        needed: dict[str, list[str]] = {}
        known: set[str] = set()
        if name_or_id is not None:
            try:
                stack = await self._find(name_or_id)
            except NotFound:
                stack = None
            if stack is not None:
                for owned in [stack, *await self.engine.operations.descendants(stack)]:
                    for name, host in await self._store.resource_hosts(owned.id):
                        if owned.id == stack.id:
                            known.add(name)
                        if host is not None:
                            needed.setdefault(host, []).append(name)
        if template is not None:
            loaded = _load_template(template)
            environment = _merge(environments)
            for name, raw in loaded.section("resources").items():
                if name not in known and self._binds_to_host(environment, name, raw):
                    needed.setdefault(self._ctx.host, []).append(name)
        return {host: sorted(set(names)) for host, names in needed.items()}

    def _binds_to_host(self, environment: Environment, name: str, raw: Any) -> bool:
        type_name = raw.get("type", raw.get("Type")) if isinstance(raw, Mapping) else None
        if not isinstance(type_name, str):
            return False  # the operation reports it
        try:
            implementation = environment.implementation_type(type_name, name)
        except ValueError:
            return False
        return self._ctx.host_for(implementation) is not None

    async def create_stack(
        self,
        name: str,
        template: TemplateInput,
        *,
        environments: Sequence[TemplateInput] = (),
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        disable_rollback: bool = False,
        timeout_mins: float | None = None,
        drift_policy: str = "notify",
        tags: Sequence[str] = (),
        wait: bool = True,
    ) -> StackView:
        _check_stack_name(name)
        _check_drift_policy(drift_policy)
        stack_id = str(uuid.uuid4())
        files = dict(files or {})
        parameters = dict(parameters or {})
        loaded = _load_template(template)
        environment = _merge(environments)
        definition = self._prepare(
            loaded, environment, files, parameters, StackIdentity(name, stack_id, self.project_id)
        )
        # The stack and its template in one transaction: never one without the other.
        created = await self._store.create_stack(
            name,
            self.project_id,
            action=Action.CREATE,
            disable_rollback=disable_rollback,
            timeout_mins=timeout_mins,
            drift_policy=drift_policy,
            tags=tags,
            stack_id=stack_id,
            template=NewTemplate(loaded.data, environment.to_data(), files, parameters),
        )
        template_id = created.raw_template_id
        assert template_id is not None  # stored with the stack, just above
        self._ctx.definitions.put(template_id, definition)
        # Only if nothing started it meanwhile: a sweeper starts a create whose client
        # seemed to die between the two commits, and one start is enough.
        started = await self.engine.operations.converge(
            stack_id, template_id, definition, Action.CREATE, ending=""
        )
        return await self._settle_operation(self._started(started, Action.CREATE), wait)

    async def update_stack(
        self,
        name_or_id: str,
        template: TemplateInput | None = None,
        *,
        environments: Sequence[TemplateInput] | None = None,
        files: Mapping[str, str] | None = None,
        parameters: Mapping[str, Any] | None = None,
        existing: bool = False,
        disable_rollback: bool | None = None,
        timeout_mins: float | None = None,
        drift_policy: str | None = None,
        converge: bool = False,
        clear_parameters: Sequence[str] = (),
        wait: bool = True,
    ) -> StackView:
        """Update the stack; ``existing=True`` is Heat's PATCH: unspecified parts are kept
        (``clear_parameters`` names kept parameters to drop, back to their defaults).

        ``converge=True`` (Heat's ``converge: true``) compares the template with observed
        reality instead of only with what was last applied: drifted resources are
        corrected, deleted ones created again. ``settings.observe_on_update`` makes that
        the rule for every update.
        """
        if template is None and not existing:
            raise InvalidRequest("a template is required unless the update is a PATCH (existing)")
        if drift_policy is not None:
            _check_drift_policy(drift_policy)
        stack, stored, previous = await self._current_template(name_or_id)
        loaded = (
            _load_template(template)
            if template is not None
            else template_from_data(stored.template, filename="<existing template>")
        )
        if environments is None and existing:
            environment = environment_from_data(stored.environment)
        else:
            environment = _merge(environments or ())
        new_files = {**stored.files, **(files or {})} if existing else dict(files or {})
        new_parameters = (
            {**stored.parameters, **(parameters or {})} if existing else dict(parameters or {})
        )
        for name in clear_parameters:
            new_parameters.pop(name, None)
        definition = self._prepare(
            loaded,
            environment,
            new_files,
            new_parameters,
            StackIdentity(stack.name, stack.id, stack.project_id),
            previous_parameters=previous.parameters,
        )
        settings: dict[str, Any] = {}
        if disable_rollback is not None:
            settings["disable_rollback"] = disable_rollback
        if timeout_mins is not None:
            settings["timeout_mins"] = timeout_mins
        if drift_policy is not None:
            settings["drift_policy"] = drift_policy
        template_id = await self._store.add_template(
            stack.id, loaded.data, environment.to_data(), new_files, new_parameters
        )
        self._ctx.definitions.put(template_id, definition)
        started = await self.engine.operations.converge(
            stack.id, template_id, definition, Action.UPDATE, converge=converge, settings=settings
        )
        return await self._settle_operation(self._started(started, Action.UPDATE), wait)

    async def _current_template(
        self, name_or_id: str
    ) -> tuple[StackRecord, TemplateRecord, StackDefinition]:
        """The stack and the template it is converging to now.

        A concurrent operation may finish and purge that template between the two reads:
        then the stack is read again.
        """
        for _attempt in range(_TEMPLATE_READ_ATTEMPTS):
            stack = await self._find(name_or_id)
            if stack.action == Action.DELETE:
                raise Conflict(f"stack {stack.name} is {stack.state}: it cannot be updated")
            if stack.raw_template_id is None:
                # A stack is stored with its template; only a state written by an older
                # converge, whose create stopped in between, has a stack without one.
                raise Conflict(
                    f"stack {stack.name} has no template (its create was interrupted before "
                    "the template was stored): `converge destroy` it, then apply again"
                )
            try:
                stored = await self._store.get_template(stack.raw_template_id)
                previous = await self._ctx.definitions.get(stack.raw_template_id)
            except NotFound:
                continue
            return stack, stored, previous
        raise Conflict(f"stack {name_or_id} changes too fast to be updated now; try again")

    async def delete_stack(self, name_or_id: str, *, wait: bool = True) -> StackView:
        stack = await self._find(name_or_id)
        await self.engine.operations.delete(stack)
        return await self._settle(stack.id, wait)

    async def cancel_update(
        self, name_or_id: str, *, rollback: bool = True, wait: bool = True
    ) -> StackView:
        stack = await self._find(name_or_id)
        await self.engine.operations.cancel_update(stack, rollback=rollback)
        return await self._settle(stack.id, wait)

    async def clear_hook(self, name_or_id: str, resource_name: str, hook: str) -> None:
        """Clear a breakpoint a resource is paused at (Heat's ``unset_hook`` signal)."""
        if hook not in HOOKS:
            raise InvalidRequest(f"unknown hook {hook!r}: use one of {', '.join(HOOKS)}")
        stack = await self._find(name_or_id)
        rows = [
            row for row in await self._store.list_resources(stack.id) if row.name == resource_name
        ]
        if not rows:
            raise NotFound(f"stack {stack.name} has no resource {resource_name!r}")
        for row in rows:
            pending = row.hook_pending or {}
            if pending.get("hook") != hook or pending.get("traversal") != stack.current_traversal:
                continue
            cleared = await self._store.update_resource(
                row.id,
                row.atomic_key,
                {
                    "hook_pending": None,
                    "cleared_hooks": [*row.cleared_hooks, f"{stack.current_traversal}:{hook}"],
                },
                events=[
                    stack_event(stack, stack.action, Status.IN_PROGRESS, "").__class__(
                        resource_name=row.name,
                        resource_type=row.type,
                        action=str(row.action),
                        status=str(row.status),
                        reason=f"Hook {hook} is cleared",
                        physical_resource_id=row.physical_resource_id,
                    )
                ],
                stack_id=stack.id,
            )
            if cleared is None:
                raise Conflict(f"resource {resource_name} changed while clearing {hook}; try again")
            node_id, is_update = pending["node"]
            message = CheckResource(
                stack.id, stack.current_traversal, int(node_id), bool(is_update)
            )
            await self._ctx.bus.send_work(message.to_dict())
            return
        raise Conflict(f"resource {resource_name} of stack {stack.name} is not paused at {hook}")

    async def check_stack(self, name_or_id: str, *, wait: bool = True) -> StackView:
        """Observe every resource and record its drift; ends CHECK_COMPLETE or CHECK_FAILED."""
        stack = await self._find(name_or_id)
        await self.engine.start_check(stack.id)
        return await self._settle(stack.id, wait)

    async def wait(self, name_or_id: str) -> StackView:
        stack = await self._find(name_or_id, include_deleted=True)
        return await self._settle(stack.id, True)
