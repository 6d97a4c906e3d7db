"""OS::Heat::TestResource: stores a string, with knobs to wait, fail and force replacement.

Heat's semantics, kept here:

- ``value`` is stored on create and update and served as the ``output`` attribute; the
  physical id is the resource's physical name; ``get_resource`` gives that id.
- Each action waits ``action_wait_secs[<action>]`` seconds, or ``wait_secs`` when the map has
  no entry for it (``-1``: wait until the action's deadline). An update that leaves ``value``
  alone does not wait.
- ``fail: true`` fails create and update with "Test Resource failed <name>" *after* the
  wait; delete never fails. A failed create stores nothing.
- Changing ``value`` while ``update_replace`` is true replaces the resource;
  ``update_replace_value`` is not update_allowed, so changing it replaces too.
- Resolving attributes first waits ``attr_wait_secs``.
- ``client_name``, ``entity_name`` (Heat polls an OpenStack client with them while waiting)
  and ``constraint_prop_secs`` (Heat delays a custom validation constraint) are accepted and
  inert: converge has no OpenStack clients and no custom constraints.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from converge.core.schema import AttributeSchema, PropertySchema, PropertyType
from converge.errors import PermanentFailure, ReplacementRequired
from converge.resources.base import AppliedState, Outcome, ResourceContext
from converge.resources.builtin.world_backed import WorldBacked

_ACTIONS = ("create", "update", "delete")
# With no deadline an infinite wait sleeps in chunks of this many seconds, forever.
_FOREVER_CHUNK = 3600.0


def _number(description: str, *, default: float | None = None) -> PropertySchema:
    return PropertySchema(PropertyType.NUMBER, description, default=default, update_allowed=True)


class HeatTestResource(WorldBacked):
    type_name = "OS::Heat::TestResource"
    description = (
        "A resource which stores the string value that was provided. For testing only: it "
        "has control knobs such as update_replace, fail and wait_secs."
    )
    properties_schema = {
        "value": PropertySchema(
            PropertyType.STRING,
            "The input string to be stored.",
            default="test_string",
            update_allowed=True,
        ),
        "update_replace": PropertySchema(
            PropertyType.BOOLEAN,
            "Value which can be set to trigger update replace for the particular resource.",
            default=False,
            update_allowed=True,
        ),
        "update_replace_value": PropertySchema(
            PropertyType.STRING, "Some value that can be stored but can not be updated."
        ),
        "fail": PropertySchema(
            PropertyType.BOOLEAN,
            "Value which can be set to fail the resource operation to test failure scenarios.",
            default=False,
            update_allowed=True,
        ),
        "wait_secs": _number("Seconds to wait after an action (-1 is infinite).", default=0),
        "action_wait_secs": PropertySchema(
            PropertyType.MAP,
            "Options for simulating waiting.",
            update_allowed=True,
            map_schema={
                action: _number(
                    f"Seconds to wait after {'an' if action == 'update' else 'a'} {action}. "
                    "Defaults to the global wait_secs."
                )
                for action in _ACTIONS
            },
        ),
        "attr_wait_secs": _number(
            "Number value for timeout during resolving output value.", default=0
        ),
        "constraint_prop_secs": _number(
            "Number value for delay during resolve constraint (accepted, inert in converge).",
            default=0,
        ),
        "client_name": PropertySchema(
            PropertyType.STRING,
            "Client to poll (accepted, inert: converge has no OpenStack clients).",
            default="",
            update_allowed=True,
        ),
        "entity_name": PropertySchema(
            PropertyType.STRING,
            "Client entity to poll (accepted, inert: converge has no OpenStack clients).",
            default="",
            update_allowed=True,
        ),
    }
    attributes_schema = {
        "output": AttributeSchema(
            "The string that was stored. This value is also available by referencing the resource.",
            PropertyType.STRING,
        ),
    }

    # Knobs of the simulation, not part of the thing (its essence is value and
    # update_replace_value).
    ignored_properties = frozenset(
        {
            "update_replace",
            "fail",
            "wait_secs",
            "action_wait_secs",
            "attr_wait_secs",
            "constraint_prop_secs",
            "client_name",
            "entity_name",
        }
    )

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        await _wait(ctx, "create", _wait_secs(properties, "create"))
        _fail_if_asked(ctx, properties)
        await self._record(ctx, ctx.physical_name, properties)
        return Outcome(ctx.physical_name, {"value": properties.get("value", "test_string")})

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        replacing = self.replacement_reason(current, properties)
        if replacing is not None:
            raise ReplacementRequired(f"{ctx.resource_name}: {replacing}")
        value_changed = properties.get("value") != current.properties.get("value")
        data = dict(current.data)
        if value_changed:
            await _wait(ctx, "update", _wait_secs(properties, "update"))
            data["value"] = properties.get("value")
        _fail_if_asked(ctx, properties)
        # Written even when nothing changed here: a converge update corrects drift so.
        await self._record(ctx, current.physical_id, properties)
        return Outcome(current.physical_id, data)

    def replacement_reason(
        self, current: AppliedState, properties: Mapping[str, Any]
    ) -> str | None:
        before = current.properties
        if properties.get("value") != before.get("value") and properties.get("update_replace"):
            return "value changed with update_replace"
        if properties.get("update_replace_value") != before.get("update_replace_value"):
            return "update_replace_value changed"
        return None

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        await _wait(ctx, "delete", _wait_secs(current.properties, "delete"))
        await self._forget(ctx, current.physical_id)

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        if not names:
            return {}
        await _wait(ctx, "attribute resolution", current.properties.get("attr_wait_secs") or 0)
        return {name: current.data.get("value") for name in names if name == "output"}


def _wait_secs(properties: Mapping[str, Any], action: str) -> float:
    per_action = properties.get("action_wait_secs") or {}
    seconds = per_action.get(action)
    if seconds is None:
        seconds = properties.get("wait_secs")
    return float(seconds or 0)


def _fail_if_asked(ctx: ResourceContext, properties: Mapping[str, Any]) -> None:
    if properties.get("fail"):
        # Heat's TestResource raises ValueError, which names the failure in the reason.
        raise PermanentFailure(f"Test Resource failed {ctx.resource_name}", kind="ValueError")


async def _wait(ctx: ResourceContext, what: str, seconds: float) -> None:
    """Sleep on the injected clock; a negative wait lasts until the deadline (or forever)."""
    remaining = ctx.remaining()
    if seconds >= 0 and (remaining is None or seconds <= remaining):
        if seconds > 0:
            await ctx.clock.sleep(seconds)
        return
    if remaining is None:
        while True:  # infinite wait and no deadline: only cancellation ends it
            await ctx.clock.sleep(_FOREVER_CHUNK)
    await ctx.clock.sleep(remaining)
    wanted = "forever (wait_secs -1)" if seconds < 0 else f"{seconds:g}s"
    raise PermanentFailure(
        f"{what} of {ctx.resource_name} timed out: it waits {wanted}, past the action's deadline"
    )
