"""Provider templates: a resource whose type is a template file is a stack of its own.

Its properties are the template's parameters and its attributes the template's outputs
(and ``OS::stack_id``), as the template layer's ``provider_schema`` declares them, so
this plugin accepts any property: validation happened there. As in Heat, every change of
properties updates the nested stack in place, and ``get_resource`` gives the nested
stack's ARN (or its ``OS::stack_id`` output). The engine does the work through
``ctx.nested``; this plugin asks for it and reads the outcome.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from converge.errors import PermanentFailure
from converge.resources.base import (
    AppliedState,
    NestedStacks,
    NestedStackState,
    Outcome,
    ResourceContext,
    ResourcePlugin,
)

PROVIDER_TYPE = "<provider template>"
STACK_ID_OUTPUT = "OS::stack_id"


class NestedStackResource(ResourcePlugin):
    """A resource whose real thing is a stack of its own: delete and observe that stack."""

    converges_inside = True

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        # Also without a physical id: a failed create leaves a stack to delete.
        state = await nested_stacks(ctx).delete(ctx, current.physical_id)
        if state is not None and state.state != "DELETE_COMPLETE":
            raise PermanentFailure(
                f"nested stack {state.stack_name} is {state.state}: {state.reason}"
            )

    async def observe(
        self, ctx: ResourceContext, current: AppliedState
    ) -> Mapping[str, Any] | None:
        # The nested stack's own resources are observed as that stack's; here only
        # whether the stack still exists.
        if ctx.nested is None:
            return dict(current.properties)
        if await ctx.nested.find(ctx, current.physical_id) is None:
            return None
        return dict(current.properties)


class ProviderTemplate(NestedStackResource):
    type_name = PROVIDER_TYPE
    description = "A nested stack made from a template file (Heat's template resource)."
    open_properties = True

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        stacks = nested_stacks(ctx)
        stack_id = await stacks.apply(ctx, properties, None)
        return settled_outcome(await stacks.wait(stack_id))

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        stacks = nested_stacks(ctx)
        stack_id = await stacks.apply(ctx, properties, current.physical_id)
        return settled_outcome(await stacks.wait(stack_id))

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        outputs: Mapping[str, Any] = current.data.get("outputs") or {}
        values: dict[str, Any] = {}
        for name in names:
            if name == STACK_ID_OUTPUT:
                values[name] = outputs.get(STACK_ID_OUTPUT, current.physical_id)
            elif name in outputs:
                values[name] = outputs[name]
        return values

    def reference_id(self, current: AppliedState) -> Any:
        # Heat's TemplateResource: the template's OS::stack_id output, else the nested
        # stack's ARN.
        outputs: Mapping[str, Any] = current.data.get("outputs") or {}
        if STACK_ID_OUTPUT in outputs:
            return outputs[STACK_ID_OUTPUT]
        return current.data.get("arn") or current.physical_id


def nested_stacks(ctx: ResourceContext) -> NestedStacks:
    if ctx.nested is None:
        raise PermanentFailure("a nested stack needs the engine, which this context lacks")
    return ctx.nested


def settled_outcome(state: NestedStackState) -> Outcome:
    if not state.is_complete:
        raise nested_failure(state)
    return Outcome(state.stack_id, {"outputs": dict(state.outputs), "arn": state.arn})


def nested_failure(state: NestedStackState) -> PermanentFailure:
    """A failed nested stack's failure as its resource's, keeping the kind and the path of
    the resource inside that failed (Heat: ``ValueError: resources.box.resources.part:``)."""
    return PermanentFailure.from_reason(
        state.reason, f"nested stack {state.stack_name} is {state.state}: {state.reason}"
    )
