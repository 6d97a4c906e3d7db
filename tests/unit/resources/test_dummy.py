"""Dummy: random physical id of name_len, a clock delay per action, fail_prop, replacement."""

from __future__ import annotations

import string
from typing import Any

import pytest

from converge.errors import PermanentFailure, ReplacementRequired
from converge.resources.base import AppliedState, ResourceContext
from converge.resources.builtin.dummy import Dummy

DEFAULTS: dict[str, Any] = {
    name: schema.default for name, schema in Dummy.properties_schema.items()
}


def props(**overrides: Any) -> dict[str, Any]:
    return {**DEFAULTS, "action_delay": 0, **overrides}


async def test_physical_id_is_random_of_name_len(ctx: ResourceContext) -> None:
    first = await Dummy().create(ctx, props(name_len=20))
    second = await Dummy().create(ctx, props(name_len=20))
    assert isinstance(first.physical_id, str) and len(first.physical_id) == 20
    assert set(first.physical_id) <= set(string.digits + "ABCDEF")
    assert first.physical_id != second.physical_id
    state = AppliedState(first.physical_id, props(name_len=20), first.data)
    assert await Dummy().attributes(ctx, state, ["value"]) == {"value": first.physical_id}


async def test_default_name_len_is_eight(ctx: ResourceContext) -> None:
    outcome = await Dummy().create(ctx, {"action_delay": 0})
    assert len(str(outcome.physical_id)) == 8


async def test_every_action_sleeps_action_delay(ctx: ResourceContext, clock: Any) -> None:
    plugin = Dummy()
    outcome = await plugin.create(ctx, props(action_delay=2.5))
    state = AppliedState(outcome.physical_id, props(action_delay=2.5), outcome.data)
    await plugin.update(ctx, state, props(action_delay=2.5, update_in_place_prop="x"))
    await plugin.delete(ctx, state)
    assert clock.sleeps == [2.5, 2.5, 2.5]


async def test_delay_defaults_to_the_setting_then_one_second(make_context: Any, clock: Any) -> None:
    await Dummy().create(make_context(settings={"dummy_action_delay": 4}), {})
    await Dummy().create(make_context(), {})
    assert clock.sleeps == [4, 1.0]


async def test_zero_delay_does_not_sleep(ctx: ResourceContext, clock: Any) -> None:
    await Dummy().create(ctx, props())
    assert clock.sleeps == []


async def test_update_in_place_prop_updates_in_place(ctx: ResourceContext) -> None:
    state = AppliedState("abc", props(), {"value": "abc"})
    outcome = await Dummy().update(ctx, state, props(update_in_place_prop="yes"))
    assert outcome.physical_id == "abc"
    assert Dummy.properties_schema["update_in_place_prop"].update_allowed


@pytest.mark.parametrize(
    "changed", [{"name_len": 9}, {"fail_prop": "maybe"}, {"sequence": "digits"}]
)
async def test_other_changes_replace(ctx: ResourceContext, changed: dict[str, Any]) -> None:
    state = AppliedState("abc", props(), {"value": "abc"})
    with pytest.raises(ReplacementRequired):
        await Dummy().update(ctx, state, props(**changed))


@pytest.mark.parametrize("word", ["yes", "YES", "y"])
async def test_fail_prop_yes_fails_create_after_the_delay(
    ctx: ResourceContext, clock: Any, word: str
) -> None:
    with pytest.raises(PermanentFailure, match=r"^Dummy failed res$"):
        await Dummy().create(ctx, props(fail_prop=word, action_delay=3))
    assert clock.now() == 3


async def test_fail_prop_fails_update(ctx: ResourceContext) -> None:
    state = AppliedState("abc", props(fail_prop="yes"), {"value": "abc"})
    with pytest.raises(PermanentFailure):
        await Dummy().update(ctx, state, props(fail_prop="yes", update_in_place_prop="z"))
