"""OS::Heat::ResourceGroup and OS::Heat::ResourceChain: nested stacks of generated members.

As in Heat, a group is a nested stack (``converge list --nested`` shows it) whose template
the plugin writes: ``count`` members from ``resource_def`` (``index_var`` replaced by each
member's name), named ``"0"``, ``"1"``, … minus what ``removal_policies`` took out. What
the members are, in which steps a rolling update or a batched create reaches them, and
what each attribute answers is decided by ``converge.core.group``; this module does the
steps. The names taken out are remembered in the resource's data across updates
(``removal_policies_mode: append``) or replaced by the current policy (``update``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from converge.core import group
from converge.core.schema import AttributeSchema, Constraint, PropertySchema, PropertyType
from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, Outcome, ResourceContext
from converge.resources.nested import NestedStackResource, nested_failure, nested_stacks

_ATTRIBUTES = {
    "refs": AttributeSchema(
        "A list of resource IDs for the resources in the group.", PropertyType.LIST
    ),
    "refs_map": AttributeSchema(
        "A map of resource names to IDs for the resources in the group.", PropertyType.MAP
    ),
    "attributes": AttributeSchema(
        "A map of resource names to the specified attribute of each individual resource "
        "(get_attr: [group, attributes, NAME]).",
        PropertyType.MAP,
    ),
    "removed_rsrc_list": AttributeSchema("A list of removed resource names.", PropertyType.LIST),
}


class GroupBase(NestedStackResource):
    """What groups and chains share: the nested stack's outputs and the attributes."""

    open_attributes = True
    attributes_schema = _ATTRIBUTES

    async def _converge(
        self,
        ctx: ResourceContext,
        stack_id: str | None,
        members: Sequence[tuple[str, Mapping[str, Any]]],
    ) -> tuple[str, Mapping[str, Any]]:
        """Bring the nested stack to these members; its id and outputs."""
        stacks = nested_stacks(ctx)
        stack_id = await stacks.apply(ctx, {}, stack_id, template=group.nested_template(members))
        state = await stacks.wait(stack_id)
        if not state.is_complete:
            raise nested_failure(state)
        return state.stack_id, state.outputs

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        data = current.data
        members: list[str] = list(data.get("names") or [])
        outputs: Mapping[str, Any] = data.get("outputs") or {}
        refs: Mapping[str, Any] = outputs.get(group.REFS_MAP_OUTPUT) or {}
        attributes: Mapping[str, Mapping[str, Any]] = outputs.get(group.ATTRIBUTES_OUTPUT) or {}
        removed: list[str] = list(data.get("removed") or [])
        return {
            name: group.group_attribute(name, members, refs, attributes, removed) for name in names
        }

    def reference_id(self, current: AppliedState) -> Any:
        return current.physical_id


class ResourceGroup(GroupBase):
    type_name = "OS::Heat::ResourceGroup"
    description = (
        "Creates one or more identically configured nested resources (a nested stack of "
        "count members made from resource_def)."
    )
    properties_schema = {
        "count": PropertySchema(
            PropertyType.INTEGER,
            "The number of resources to create.",
            default=1,
            constraints=(Constraint("range", {"min": 0}),),
            update_allowed=True,
        ),
        "index_var": PropertySchema(
            PropertyType.STRING,
            "A variable that this resource will use to replace with the current index of a "
            "given resource in the group.",
            default="%index%",
            constraints=(Constraint("length", {"min": 3}),),
            update_allowed=True,
        ),
        "resource_def": PropertySchema(
            PropertyType.MAP,
            "Resource definition for the resources in the group.",
            required=True,
            update_allowed=True,
            map_schema={
                "type": PropertySchema(
                    PropertyType.STRING, "The type of the resources in the group.", required=True
                ),
                "properties": PropertySchema(
                    PropertyType.MAP, "Property values for the resources in the group."
                ),
                "metadata": PropertySchema(
                    PropertyType.MAP, "Supplied metadata for the resources in the group."
                ),
            },
        ),
        "removal_policies": PropertySchema(
            PropertyType.LIST,
            "Policies for removal of resources on update.",
            default=[],
            update_allowed=True,
            item_schema=PropertySchema(
                PropertyType.MAP,
                "Policy to be processed when doing an update which requires removal of "
                "specific resources.",
                map_schema={
                    "resource_list": PropertySchema(
                        PropertyType.LIST,
                        "List of resources to be removed when doing an update which requires "
                        "removal of specific resources. The resource may be specified several "
                        "ways: (1) The resource name, as in the nested stack, (2) The resource "
                        "reference returned from get_resource in a template, as available via "
                        "the 'refs' attribute. Note this is destructive on update when "
                        "specified; even if the count is not being reduced, and once a "
                        "resource name is removed, its name is never reused in subsequent "
                        "updates.",
                        default=[],
                    ),
                },
            ),
        ),
        "removal_policies_mode": PropertySchema(
            PropertyType.STRING,
            'How to handle changes to removal_policies on update. The default "append" mode '
            'appends to the internal list, "update" replaces it on update.',
            default=group.REMOVE_APPEND,
            constraints=(Constraint("allowed_values", [group.REMOVE_APPEND, group.REMOVE_UPDATE]),),
            update_allowed=True,
        ),
    }

    def validation_template(self, properties: Mapping[str, Any]) -> Mapping[str, Any] | None:
        # As Heat's validate_nested_stack: a group of one member shows what every member is.
        resource_def = properties.get("resource_def")
        if not isinstance(resource_def, Mapping) or not isinstance(resource_def.get("type"), str):
            return None
        return group.nested_template(group.members_from(["0"], resource_def, "%index%"))

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        removed = group.removed_names(
            properties.get("removal_policies"), group.REMOVE_APPEND, (), None
        )
        names = group.member_names(_count(properties), removed)
        batch = _policy(ctx, "batch_create")
        if batch is not None and names:
            size, pause = _batch_settings(batch, "batch_create", rolling=False)
            return await self._in_steps(
                ctx, None, [], properties, removed, group.batches(len(names), 0, size, 0), pause
            )
        members = group.members_from(names, properties["resource_def"], _index_var(properties))
        stack_id, outputs = await self._converge(ctx, None, members)
        return _outcome(stack_id, names, removed, outputs)

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        outputs: Mapping[str, Any] = current.data.get("outputs") or {}
        removed = group.removed_names(
            properties.get("removal_policies"),
            properties.get("removal_policies_mode") or group.REMOVE_APPEND,
            current.data.get("removed") or (),
            outputs.get(group.REFS_MAP_OUTPUT) or {},
        )
        names = group.member_names(_count(properties), removed)
        old_names = [name for name in current.data.get("names") or () if name not in set(removed)]
        definition_changed = current.properties.get("resource_def") != properties.get(
            "resource_def"
        ) or _index_var(current.properties) != _index_var(properties)
        rolling = _policy(ctx, "rolling_update")
        if rolling is not None and definition_changed and old_names:
            size, pause = _batch_settings(rolling, "rolling_update", rolling=True)
            minimum = _integer(rolling, "min_in_service", 0, "rolling_update")
            old = group.members_from(
                old_names, current.properties["resource_def"], _index_var(current.properties)
            )
            steps = group.batches(len(names), len(old_names), size, minimum)
            return await self._in_steps(
                ctx, current.physical_id, old, properties, removed, steps, pause
            )
        members = group.members_from(names, properties["resource_def"], _index_var(properties))
        stack_id, new_outputs = await self._converge(ctx, current.physical_id, members)
        return _outcome(stack_id, names, removed, new_outputs)

    async def _in_steps(
        self,
        ctx: ResourceContext,
        stack_id: str | None,
        members: Sequence[tuple[str, Mapping[str, Any]]],
        properties: Mapping[str, Any],
        removed: Sequence[str],
        steps: Sequence[group.Batch],
        pause: float,
    ) -> Outcome:
        """Reach the target through ``steps``, pausing between them (Heat's batches)."""
        import asyncio  # here, not at the top: validate imports this module for its schema

        target = _count(properties)
        current = list(members)
        outputs: Mapping[str, Any] = {}
        for position, step in enumerate(steps):
            if position and pause:
                await asyncio.sleep(pause)
            names = group.member_names(step.capacity, removed)
            current = group.step_members(
                current, properties["resource_def"], _index_var(properties), names, target, step
            )
            stack_id, outputs = await self._converge(ctx, stack_id, current)
            ctx.logger.info(
                "group batch done",
                extra={"batch": position + 1, "batches": len(steps), "size": len(current)},
            )
        assert stack_id is not None  # steps is never empty when called
        return _outcome(stack_id, [name for name, _ in current], removed, outputs)


class ResourceChain(GroupBase):
    type_name = "OS::Heat::ResourceChain"
    description = (
        "Creates one or more resources of the given types, each depending on the one before "
        "unless concurrent."
    )
    properties_schema = {
        "resources": PropertySchema(
            PropertyType.LIST,
            "The list of resource types to create. This list may contain type names or "
            "aliases defined in the resource registry. Specific template names are not "
            "supported.",
            required=True,
            update_allowed=True,
            item_schema=PropertySchema(PropertyType.STRING),
        ),
        "concurrent": PropertySchema(
            PropertyType.BOOLEAN,
            "If true, the resources in the chain will be created concurrently. If false or "
            "omitted, each resource will be treated as having a dependency on the previous "
            "resource in the list.",
            default=False,
        ),
        "resource_properties": PropertySchema(
            PropertyType.MAP,
            "Properties to pass to each resource being created in the chain.",
            update_allowed=True,
        ),
    }

    def validation_template(self, properties: Mapping[str, Any]) -> Mapping[str, Any] | None:
        types = properties.get("resources")
        if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
            return None
        return group.nested_template(
            list(group.chain_template(types, properties.get("resource_properties"), False))
        )

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        return await self._chain(ctx, None, properties)

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        return await self._chain(ctx, current.physical_id, properties)

    async def _chain(
        self, ctx: ResourceContext, stack_id: str | None, properties: Mapping[str, Any]
    ) -> Outcome:
        members = list(
            group.chain_template(
                properties.get("resources") or [],
                properties.get("resource_properties"),
                bool(properties.get("concurrent")),
            )
        )
        stack_id, outputs = await self._converge(ctx, stack_id, members)
        return _outcome(stack_id, [name for name, _ in members], [], outputs)


def _outcome(
    stack_id: str, names: Sequence[str], removed: Sequence[str], outputs: Mapping[str, Any]
) -> Outcome:
    return Outcome(
        stack_id, {"names": list(names), "removed": list(removed), "outputs": dict(outputs)}
    )


def _count(properties: Mapping[str, Any]) -> int:
    count = properties.get("count")
    return 1 if count is None else int(count)


def _index_var(properties: Mapping[str, Any]) -> str:
    return str(properties.get("index_var") or "%index%")


def _policy(ctx: ResourceContext, name: str) -> Mapping[str, Any] | None:
    """One section of the resource's update_policy; a clear failure when malformed."""
    policy = ctx.update_policy
    if policy is None:
        return None
    if not isinstance(policy, Mapping):
        raise PermanentFailure(f"update_policy must be a map, not {policy!r}")
    unknown = sorted(set(policy) - {"rolling_update", "batch_create"})
    if unknown:
        raise PermanentFailure(
            f"update_policy: unknown section {unknown[0]!r} "
            "(a ResourceGroup knows rolling_update and batch_create)"
        )
    section = policy.get(name)
    if section is None:
        return None
    if not isinstance(section, Mapping):
        raise PermanentFailure(f"update_policy.{name} must be a map, not {section!r}")
    return section


def _batch_settings(section: Mapping[str, Any], where: str, *, rolling: bool) -> tuple[int, float]:
    allowed = {"max_batch_size", "pause_time"} | ({"min_in_service"} if rolling else set())
    unknown = sorted(set(section) - allowed)
    if unknown:
        raise PermanentFailure(
            f"update_policy.{where}: unknown key {unknown[0]!r} (expected "
            f"{', '.join(sorted(allowed))})"
        )
    size = _integer(section, "max_batch_size", 1, where)
    if size < 1:
        raise PermanentFailure(f"update_policy.{where}.max_batch_size must be at least 1")
    pause = section.get("pause_time", 0)
    try:
        pause = float(pause)
    except (TypeError, ValueError):
        raise PermanentFailure(
            f"update_policy.{where}.pause_time must be a number, not {pause!r}"
        ) from None
    if pause < 0:
        raise PermanentFailure(f"update_policy.{where}.pause_time must not be negative")
    return size, pause


def _integer(section: Mapping[str, Any], key: str, default: int, where: str) -> int:
    value = section.get(key, default)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise PermanentFailure(
            f"update_policy.{where}.{key} must be an integer, not {value!r}"
        ) from None
    if number < 0:
        raise PermanentFailure(f"update_policy.{where}.{key} must not be negative")
    return number
