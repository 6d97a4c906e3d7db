"""A listing's resources (``list_resource_summaries``, Heat's resource list without
details) read only some columns: they must show what the full views show, on SQLite and
on PostgreSQL."""

from __future__ import annotations

import dataclasses

from converge.api import Converge
from support.world import eventually

TEMPLATE = """
heat_template_version: 2021-04-16
parameters:
  text: {type: string, default: one}
resources:
  first: {type: OS::Heat::Value, properties: {value: {get_param: text}}}
  second:
    type: My::Thing
    properties: {value: {get_attr: [first, value]}, update_replace: true}
  failing: {type: OS::Heat::TestResource, properties: {fail: true}, depends_on: [first]}
"""
ENVIRONMENT = "resource_registry:\n  My::Thing: OS::Heat::TestResource\n"


async def test_summaries_show_what_the_full_views_show(cv: Converge) -> None:
    await cv.create_stack(
        "listed", TEMPLATE, environments=[ENVIRONMENT], disable_rollback=True, wait=True
    )
    # A replacement's update (second is replaced), then failed on purpose: rows of every
    # kind, a failure reason, an alias type, and requirements both ways.
    await cv.update_stack(
        "listed", TEMPLATE, environments=[ENVIRONMENT], parameters={"text": "two"}, wait=True
    )
    # The failed update is settled, but an action it started may still be storing its
    # result (the old second's delete): both views are read once every row has settled.
    await eventually(lambda: _rows_settled(cv, "listed"))
    full = await cv.list_resources("listed")
    summaries = await cv.list_resource_summaries("listed")
    assert [s.id for s in summaries] == [f.id for f in full]
    for summary, view in zip(summaries, full, strict=True):
        shown = dataclasses.asdict(view)
        del shown["attributes"], shown["properties"]
        assert dataclasses.asdict(summary) == shown
    by_name = {s.resource_name: s for s in summaries}
    assert by_name["second"].resource_type == "My::Thing"  # as the template wrote it
    assert set(by_name["first"].required_by) == {"failing", "second"}
    assert by_name["failing"].resource_status.endswith("FAILED")
    assert by_name["failing"].resource_status_reason


async def _rows_settled(cv: Converge, stack: str) -> bool:
    return not any(
        r.resource_status.endswith("IN_PROGRESS") for r in await cv.list_resources(stack)
    )
