"""OS::Heat::None: accepts anything, never replaced, every attribute None."""

from __future__ import annotations

import dataclasses
import uuid

from converge.resources.base import AppliedState, ResourceContext
from converge.resources.builtin.none import NoneResource


async def test_create_accepts_any_properties_and_gives_a_uuid(ctx: ResourceContext) -> None:
    plugin = NoneResource()
    first = await plugin.create(ctx, {"image": "x", "anything": {"nested": [1, 2]}})
    other = dataclasses.replace(ctx, physical_name=f"{ctx.physical_name}-other")
    second = await plugin.create(other, {})
    assert uuid.UUID(str(first.physical_id))
    assert first.physical_id != second.physical_id


async def test_a_create_run_again_finds_the_same_thing(ctx: ResourceContext) -> None:
    """A worker killed after the create recorded its thing, before the row stored the id:
    the create run again for that row makes no second thing."""
    plugin = NoneResource()
    first = await plugin.create(ctx, {})
    again = await plugin.create(ctx, {})
    assert again.physical_id == first.physical_id


def test_schema_declares_open_properties() -> None:
    schema = NoneResource.schema()
    assert schema.open_properties
    assert schema.type_name == "OS::Heat::None"
    assert dict(schema.properties) == {}


async def test_any_change_is_an_update_that_keeps_everything(ctx: ResourceContext) -> None:
    state = AppliedState("pid-1", {"flavor": "small"}, {"k": "v"})
    outcome = await NoneResource().update(ctx, state, {"flavor": "huge", "new": 1})
    assert outcome.physical_id == "pid-1"
    assert outcome.data == {"k": "v"}


async def test_every_attribute_is_none(ctx: ResourceContext) -> None:
    state = AppliedState("pid", {})
    values = await NoneResource().attributes(ctx, state, ["first_address", "networks"])
    assert values == {"first_address": None, "networks": None}


async def test_delete_is_idempotent(ctx: ResourceContext) -> None:
    state = AppliedState("pid", {})
    await NoneResource().delete(ctx, state)
    await NoneResource().delete(ctx, state)
