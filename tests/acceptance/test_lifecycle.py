"""Create, update in place, replace, delete and outputs, asserted on the recorded world."""

from __future__ import annotations

from typing import Any

import pytest

from converge.api import Converge
from converge.errors import NotFound
from support.world import Reality

CHAIN = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
  f: {type: string, default: x}
resources:
  db:
    type: Test::Thing
    properties: {value: {get_param: v}, fixed: {get_param: f}}
  app:
    type: Test::Thing
    properties:
      value: {list_join: ['-', [app, {get_attr: [db, value]}]]}
  web:
    type: Test::Thing
    depends_on: app
    properties: {value: {get_resource: app}}
outputs:
  db_value: {value: {get_attr: [db, value]}, description: the db}
  app_id: {value: {get_resource: app}}
  broken: {value: {str_split: [',', {get_attr: [web, value]}, 5]}}
"""


async def test_create_in_dependency_order_with_outputs(cv: Converge, reality: Reality) -> None:
    stack = await cv.create_stack("chain", CHAIN)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert stack.stack_status_reason == "Stack CREATE completed successfully"
    assert [name for _, name, _ in reality.log] == ["db", "app", "web"]
    app_id = next(iter(reality.by_name("app")))
    assert list(reality.by_name("app").values())[0]["value"] == "app-one"
    assert list(reality.by_name("web").values())[0]["value"] == app_id
    outputs = {o["output_key"]: o for o in await cv.outputs("chain")}
    assert outputs["db_value"]["output_value"] == "one"
    assert outputs["db_value"]["description"] == "the db"
    assert outputs["app_id"]["output_value"] == app_id
    # an output that cannot be resolved carries its error; the stack is still complete
    assert "output_error" in outputs["broken"]
    resources = {r.resource_name: r for r in await cv.list_resources("chain")}
    assert {r.resource_status for r in resources.values()} == {"CREATE_COMPLETE"}
    assert resources["app"].physical_resource_id == app_id
    events = await cv.list_events("chain")
    assert events[0].resource_status == "CREATE_IN_PROGRESS"
    assert events[0].resource_name == "chain"
    assert events[-1].resource_status == "CREATE_COMPLETE"
    assert events[-1].resource_status_reason == "Stack CREATE completed successfully"


async def test_update_in_place_keeps_physical_ids(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("chain", CHAIN)
    before = set(reality.things)
    stack = await cv.update_stack("chain", CHAIN, parameters={"v": "two"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert set(reality.things) == before
    assert list(reality.by_name("app").values())[0]["value"] == "app-two"
    assert reality.actions("update") == [
        next(iter(reality.by_name("db"))),
        next(iter(reality.by_name("app"))),
    ]


async def test_replacement_is_created_before_the_old_one_goes(
    cv: Converge, reality: Reality
) -> None:
    template = """
heat_template_version: 2021-04-16
parameters: {f: {type: string}}
resources:
  db: {type: Test::Thing, properties: {fixed: {get_param: f}}}
  app: {type: Test::Thing, properties: {value: {get_attr: [db, id]}}}
"""
    await cv.create_stack("rep", template, parameters={"f": "x"})
    (old_db,), (app,) = reality.by_name("db"), reality.by_name("app")
    stack = await cv.update_stack("rep", template, parameters={"f": "y"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    (new_db,) = reality.by_name("db")
    assert new_db != old_db
    assert reality.by_name("app") == {app: {**reality.things[app], "value": new_db}}
    log = [(action, pid) for action, _, pid in reality.log]
    # create-before-delete, and the dependent points at the replacement before the old goes
    assert (
        log.index(("create", new_db)) < log.index(("update", app)) < log.index(("delete", old_db))
    )
    assert len(await cv.list_resources("rep")) == 2


async def test_delete_removes_everything_dependents_first(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("chain", CHAIN)
    stack = await cv.delete_stack("chain")
    assert stack.stack_status == "DELETE_COMPLETE"
    assert reality.things == {}
    assert [name for action, name, _ in reality.log if action == "delete"] == ["web", "app", "db"]
    assert await cv.list_stacks() == []
    # the name is free again
    again = await cv.create_stack("chain", CHAIN)
    assert again.stack_status == "CREATE_COMPLETE"


async def test_removed_resource_is_deleted_and_retain_keeps_reality(
    cv: Converge, reality: Reality
) -> None:
    template = """
heat_template_version: 2016-10-14
resources:
  keep: {type: Test::Thing, deletion_policy: retain, properties: {value: k}}
  drop: {type: Test::Thing, properties: {value: d}}
"""
    await cv.create_stack("s", template)
    smaller = "heat_template_version: 2016-10-14\nresources: {}\n"
    stack = await cv.update_stack("s", smaller)
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert [p["__name__"] for p in reality.things.values()] == ["keep"]
    assert await cv.list_resources("s") == []


async def test_patch_update_reuses_template_and_parameters(cv: Converge, reality: Reality) -> None:
    await cv.create_stack("chain", CHAIN, parameters={"f": "z"})
    stack = await cv.update_stack("chain", existing=True, parameters={"v": "three"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    db = list(reality.by_name("db").values())[0]
    assert (db["value"], db["fixed"]) == ("three", "z")
    assert len(reality.actions("create")) == 3  # nothing replaced: f kept its value


async def test_depends_on_orders_work_without_data(cv: Converge, reality: Reality) -> None:
    template = """
heat_template_version: 2015-04-30
resources:
  first: {type: Test::Thing}
  second: {type: Test::Thing, depends_on: [first]}
  third: {type: Test::Thing, depends_on: second}
"""
    await cv.create_stack("order", template)
    assert [name for _, name, _ in reality.log] == ["first", "second", "third"]


@pytest.mark.embedded_only("watches the store of the process that completes the delete")
async def test_the_commit_that_says_delete_complete_frees_the_name(cv: Converge) -> None:
    """No moment where a client sees DELETE_COMPLETE and the name is still taken (a
    `delete --wait` then `create` of the same name would get a conflict): looked at just
    after that commit, before the stack's leftovers are cleared."""
    created = await cv.create_stack("chain", CHAIN)
    store = cv.engine.ctx.store
    clear_leftovers = store.purge_stack_data
    seen: list[tuple[str, bool]] = []

    async def looking_first(stack_id: str, keep_template_ids: Any) -> None:
        stack = await store.get_stack(stack_id)
        try:
            await store.find_stack("chain", stack.project_id)
            taken = True
        except NotFound:
            taken = False
        seen.append((stack.state, taken))
        await clear_leftovers(stack_id, keep_template_ids)

    store.purge_stack_data = looking_first  # type: ignore[method-assign]
    await cv.delete_stack(created.id)
    assert seen[-1] == ("DELETE_COMPLETE", False)
