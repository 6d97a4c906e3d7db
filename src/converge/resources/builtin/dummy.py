"""Dummy: the convergence proof-of-concept's test resource (random id, a delay, a fail knob).

Semantics of the proof of concept (``OS::Heat::Dummy``, also registered as ``Dummy``):

- the physical id is a fresh random string of ``name_len`` characters from ``sequence``
  (default hexdigits), also served as the ``value`` attribute;
- create, update and delete each sleep ``action_delay`` seconds on the injected clock; when
  the property is absent the delay comes from the setting ``dummy_action_delay`` (default 1
  second). The proof of concept slept a random 1-5 s; a fixed, configurable delay keeps runs
  reproducible, and tests set 0;
- ``fail_prop`` "yes" (or "y", any case) fails create and update after the delay;
- changing ``update_in_place_prop`` (or ``action_delay``) updates in place; changing
  anything else replaces the resource.
"""

from __future__ import annotations

import secrets
from collections.abc import Collection, Mapping
from typing import Any

from converge.core.schema import AttributeSchema, Constraint, PropertySchema, PropertyType
from converge.errors import PermanentFailure, ReplacementRequired
from converge.resources.base import AppliedState, Outcome, ResourceContext
from converge.resources.builtin.random_string import CHARACTER_CLASSES
from converge.resources.builtin.world_backed import WorldBacked

DEFAULT_ACTION_DELAY = 1.0
_FAIL_WORDS = ("yes", "y")


class Dummy(WorldBacked):
    type_name = "OS::Heat::Dummy"
    description = "A dummy resource with a random string as its id, for testing convergence."
    properties_schema = {
        "name_len": PropertySchema(
            PropertyType.INTEGER,
            "Length of the random string used as the physical id.",
            default=8,
            constraints=(Constraint("range", {"min": 1, "max": 512}),),
        ),
        "sequence": PropertySchema(
            PropertyType.STRING,
            "Sequence of characters to build the random string from.",
            default="hexdigits",
            constraints=(Constraint("allowed_values", list(CHARACTER_CLASSES)),),
        ),
        "update_in_place_prop": PropertySchema(
            PropertyType.STRING,
            "Value which can be set or changed on stack update to trigger the resource for "
            "update in place.",
            default="",
            update_allowed=True,
        ),
        "fail_prop": PropertySchema(
            PropertyType.STRING,
            'Set to "yes" to make create and update fail, to test failure scenarios.',
            default="no",
        ),
        "action_delay": PropertySchema(
            PropertyType.NUMBER,
            "Seconds each action sleeps; when absent, the setting dummy_action_delay "
            f"(default {DEFAULT_ACTION_DELAY:g}).",
            constraints=(Constraint("range", {"min": 0}),),
            update_allowed=True,
        ),
    }
    attributes_schema = {
        "value": AttributeSchema("The random string used as the physical id.", PropertyType.STRING),
    }
    # Knobs of the simulation, not part of the thing.
    ignored_properties = frozenset({"fail_prop", "action_delay"})

    async def create(self, ctx: ResourceContext, properties: Mapping[str, Any]) -> Outcome:
        length = int(properties.get("name_len") or 8)
        chars = CHARACTER_CLASSES.get(properties.get("sequence") or "hexdigits")
        if chars is None:
            raise PermanentFailure(
                f"{ctx.resource_name}: sequence must be one of {', '.join(CHARACTER_CLASSES)}"
            )
        name = "".join(secrets.choice(chars) for _ in range(length))
        await _delay(ctx, properties)
        _fail_if_asked(ctx, properties)
        await self._record(ctx, name, properties)
        return Outcome(name, {"value": name})

    async def update(
        self, ctx: ResourceContext, current: AppliedState, properties: Mapping[str, Any]
    ) -> Outcome:
        replacing = self.replacement_reason(current, properties)
        if replacing is not None:
            raise ReplacementRequired(f"{ctx.resource_name}: {replacing}")
        await _delay(ctx, properties)
        _fail_if_asked(ctx, properties)
        await self._record(ctx, current.physical_id, properties)
        return Outcome(current.physical_id, current.data)

    def _made_id(self, ctx: ResourceContext) -> None:
        return None  # a random name, as the prototype's: not found again from the row

    def replacement_reason(
        self, current: AppliedState, properties: Mapping[str, Any]
    ) -> str | None:
        for name, schema in self.properties_schema.items():
            if not schema.update_allowed and properties.get(name) != current.properties.get(name):
                return f"{name} changed"
        return None

    async def delete(self, ctx: ResourceContext, current: AppliedState) -> None:
        await _delay(ctx, current.properties)
        await self._forget(ctx, current.physical_id)

    async def attributes(
        self, ctx: ResourceContext, current: AppliedState, names: Collection[str]
    ) -> Mapping[str, Any]:
        return {"value": current.data.get("value")} if "value" in names else {}


async def _delay(ctx: ResourceContext, properties: Mapping[str, Any]) -> None:
    seconds = properties.get("action_delay")
    if seconds is None:
        seconds = ctx.settings.get("dummy_action_delay", DEFAULT_ACTION_DELAY)
    if float(seconds) > 0:
        await ctx.clock.sleep(float(seconds))


def _fail_if_asked(ctx: ResourceContext, properties: Mapping[str, Any]) -> None:
    if str(properties.get("fail_prop") or "").lower() in _FAIL_WORDS:
        raise PermanentFailure(f"Dummy failed {ctx.resource_name}")
