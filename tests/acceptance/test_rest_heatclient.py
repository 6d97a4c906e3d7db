"""Heat's v1 API driven by python-heatclient's Python API, the real client, over a socket."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from heatclient import client as heat_client
from heatclient import exc as heat_exc

from converge.api import Converge
from support.distributed import Deployment
from support.rest_server import (
    MODES,
    RestServer,
    converge_thread,
    rest_server_in,
    wait_for,
    wait_for_listening,
)

TEMPLATE = """
heat_template_version: 2016-10-14
description: two values and a none
parameters:
  greeting: {type: string, default: hello, description: what a says}
  count: {type: number, default: 1, constraints: [{range: {min: 1, max: 5}}]}
resources:
  a:
    type: OS::Heat::Value
    properties: {value: {get_param: greeting}}
    metadata: {role: {get_param: greeting}}
  b:
    type: OS::Heat::TestResource
    properties: {value: {get_attr: [a, value]}, update_replace: false}
outputs:
  said: {value: {get_attr: [a, value]}, description: the greeting}
  b_value: {value: {get_attr: [b, output]}}
"""


@pytest.fixture(params=MODES)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestServer]:
    """Embedded, and ``converge serve`` processes over PostgreSQL and RabbitMQ."""
    with rest_server_in(request.param, request, tmp_path / "state.db") as running:
        yield running


@pytest.fixture
def heat(server: RestServer) -> Any:
    return heat_client.Client("1", endpoint=server.endpoint("alpha"), token=server.token("alpha"))


def template(text: str = TEMPLATE) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def settled(heat: Any, stack_id: str) -> Any:
    """The stack once it is no longer IN_PROGRESS."""
    found: list[Any] = []

    def check() -> bool:
        found[:] = [heat.stacks.get(stack_id)]
        return not found[0].stack_status.endswith("IN_PROGRESS")

    wait_for(check)
    return found[0]


def create(heat: Any, name: str = "web", **fields: Any) -> Any:
    fields.setdefault("template", template())
    created = heat.stacks.create(stack_name=name, **fields)
    return settled(heat, created["stack"]["id"])


def test_create_show_list_outputs_template_and_delete(heat: Any) -> None:
    stack = create(heat, parameters={"greeting": "hi"}, tags="blue,green")
    assert stack.stack_status == "CREATE_COMPLETE"
    assert stack.stack_name == "web"
    assert stack.description == "two values and a none"
    assert stack.parameters["greeting"] == "hi"
    assert stack.parameters["OS::stack_name"] == "web"
    assert stack.tags == ["blue", "green"]
    assert stack.disable_rollback is True  # Heat's default on create
    # Found by name through the 302 to /stacks/web/<id>, and by id alone.
    assert heat.stacks.get("web").id == stack.id
    assert heat.stacks.get(stack.id).stack_name == "web"
    identifier = f"web/{stack.id}"
    outputs = {o["output_key"]: o for o in heat.stacks.output_list(identifier)["outputs"]}
    assert set(outputs) == {"said", "b_value"}
    said = heat.stacks.output_show(identifier, "said")["output"]
    assert said["output_value"] == "hi" and said["description"] == "the greeting"
    with pytest.raises(heat_exc.HTTPNotFound):
        heat.stacks.output_show(identifier, "nope")
    assert heat.stacks.template(identifier)["description"] == "two values and a none"
    assert heat.stacks.environment(identifier)["parameters"] == {"greeting": "hi"}
    assert heat.stacks.files(identifier) == {}
    assert [s.stack_name for s in heat.stacks.list()] == ["web"]
    assert [s.stack_name for s in heat.stacks.list(filters={"status": "COMPLETE"})] == ["web"]
    assert list(heat.stacks.list(filters={"name": "other"})) == []
    assert [s.stack_name for s in heat.stacks.list(tags="blue")] == ["web"]
    heat.stacks.delete(identifier)
    gone = settled(heat, stack.id)
    assert gone.stack_status == "DELETE_COMPLETE"
    with pytest.raises(heat_exc.HTTPNotFound):
        heat.stacks.get("web")
    assert list(heat.stacks.list()) == []


def test_list_sorts_pages_with_markers_and_counts(heat: Any) -> None:
    for name in ("c1", "c2", "c3"):
        create(heat, name)
    names = [s.stack_name for s in heat.stacks.list(sort_keys=["stack_name"], sort_dir="asc")]
    assert names == ["c1", "c2", "c3"]
    first = list(heat.stacks.list(limit=2, sort_keys="stack_name", sort_dir="asc"))
    assert [s.stack_name for s in first] == ["c1", "c2"]
    rest = heat.stacks.list(marker=first[0].id, sort_keys="stack_name", sort_dir="asc")
    assert [s.stack_name for s in rest] == ["c2", "c3"]
    page = heat.http_client.get(
        "/stacks?limit=2&sort_keys=stack_name&sort_dir=desc&with_count=true"
    )
    body = page.json()
    assert [s["stack_name"] for s in body["stacks"]] == ["c3", "c2"]
    assert body["count"] == 3 and body["links"][0]["rel"] == "next"
    marker = body["stacks"][-1]["id"]
    rest = heat.http_client.get(f"/stacks?sort_keys=stack_name&sort_dir=desc&marker={marker}")
    assert [s["stack_name"] for s in rest.json()["stacks"]] == ["c1"]
    with pytest.raises(heat_exc.HTTPBadRequest, match="sort key"):
        list(heat.stacks.list(sort_keys="nonsense"))


def test_update_put_and_patch(heat: Any) -> None:
    stack = create(heat, parameters={"greeting": "hi"})
    identifier = f"web/{stack.id}"
    b_before = heat.resources.get(identifier, "b").physical_resource_id
    changed = TEMPLATE.replace(
        "update_replace: false", "update_replace: false, action_wait_secs: {update: 0}"
    )
    heat.stacks.update(identifier, template=template(changed), parameters={"greeting": "yo"})
    stack = settled(heat, stack.id)
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert heat.stacks.output_show(identifier, "said")["output"]["output_value"] == "yo"
    assert heat.resources.get(identifier, "b").physical_resource_id == b_before
    # PATCH keeps the template and the other parameters; clear_parameters drops one.
    heat.stacks.update(identifier, existing=True, parameters={"count": 2})
    stack = settled(heat, stack.id)
    assert stack.stack_status == "UPDATE_COMPLETE"
    # Heat shows parameter values as text.
    assert stack.parameters["greeting"] == "yo" and stack.parameters["count"] == "2"
    heat.stacks.update(identifier, existing=True, clear_parameters=["greeting"])
    stack = settled(heat, stack.id)
    assert stack.parameters["greeting"] == "hello"
    with pytest.raises(heat_exc.HTTPBadRequest, match="No template specified"):
        heat.stacks.update(identifier, parameters={"greeting": "x"})


def test_previews_of_create_and_update(heat: Any) -> None:
    preview = heat.stacks.preview(stack_name="draft", template=template())
    assert sorted(r["resource_name"] for r in preview.resources) == ["a", "b"]
    assert preview.description == "two values and a none"
    assert list(heat.stacks.list()) == []  # a preview creates nothing
    stack = create(heat)
    identifier = f"web/{stack.id}"
    text = TEMPLATE.replace("  b:\n", "  c: {type: OS::Heat::None}\n  b:\n")
    changes = heat.stacks.preview_update(
        identifier, template=template(text), parameters={"greeting": "new"}, show_nested=True
    )["resource_changes"]
    assert [r["resource_name"] for r in changes["added"]] == ["c"]
    assert [r["resource_name"] for r in changes["updated"]] == ["a"]
    patch = heat.stacks.preview_update(identifier, existing=True, parameters={})
    assert sorted(r["resource_name"] for r in patch["resource_changes"]["unchanged"]) == [
        "a",
        "b",
    ]
    assert heat.stacks.get(identifier).stack_status == "CREATE_COMPLETE"  # nothing changed


def test_hooks_cleared_through_signal_and_cancel_update(heat: Any) -> None:
    environment = {"resource_registry": {"resources": {"b": {"hooks": "pre-create"}}}}
    created = heat.stacks.create(stack_name="web", template=template(), environment=environment)
    identifier = f"web/{created['stack']['id']}"

    def paused(name: str) -> bool:
        try:
            events = heat.events.list(identifier, resource_name=name)
        except heat_exc.HTTPNotFound:  # Heat's answer while a resource has no event yet
            return False
        return any("paused" in e.resource_status_reason.lower() for e in events)

    wait_for(lambda: any(r.resource_name == "a" for r in heat.resources.list(identifier)))
    wait_for(lambda: paused("b"))
    assert heat.stacks.get(identifier).stack_status == "CREATE_IN_PROGRESS"
    heat.resources.signal(identifier, "b", data={"unset_hook": "pre-create"})
    assert settled(heat, identifier).stack_status == "CREATE_COMPLETE"
    with pytest.raises(heat_exc.HTTPBadRequest, match="takes no signals"):
        heat.resources.signal(identifier, "a", data={"anything": 1})
    # An update paused at a pre-update hook can be cancelled: it rolls back.
    hooked = {"resource_registry": {"resources": {"a": {"hooks": "pre-update"}}}}
    heat.stacks.update(
        identifier,
        template=template(),
        environment=hooked,
        parameters={"greeting": "x"},
        disable_rollback=False,
    )
    wait_for(lambda: heat.stacks.get(identifier).stack_status == "UPDATE_IN_PROGRESS")
    wait_for(lambda: paused("a"))
    heat.actions.cancel_update(identifier)
    assert settled(heat, identifier).stack_status == "ROLLBACK_COMPLETE"
    with pytest.raises(heat_exc.HTTPConflict):
        heat.actions.cancel_without_rollback(identifier)


def test_check_suspend_and_abandon(heat: Any) -> None:
    stack = create(heat)
    identifier = f"web/{stack.id}"
    heat.actions.check(identifier)
    assert settled(heat, identifier).stack_status == "CHECK_COMPLETE"
    with pytest.raises(heat_exc.HTTPBadRequest, match="suspend is not supported"):
        heat.actions.suspend(identifier)
    with pytest.raises(heat_exc.HTTPBadRequest, match="Abandon is not supported"):
        heat.stacks.abandon(identifier)


def test_events_with_limits_markers_filters_and_resources(heat: Any) -> None:
    stack = create(heat)
    identifier = f"web/{stack.id}"
    every = heat.events.list(identifier)
    assert [e.resource_status for e in every][:2] == ["CREATE_IN_PROGRESS", "CREATE_IN_PROGRESS"]
    assert every[-1].resource_name == "web" and every[-1].resource_status == "CREATE_COMPLETE"
    first = heat.events.list(identifier, limit=2)
    after = heat.events.list(identifier, marker=first[-1].id, limit=100)
    assert [e.id for e in first + after] == [e.id for e in every]
    newest = heat.events.list(identifier, sort_dir="desc", limit=1)
    assert newest[0].id == every[-1].id
    complete = heat.events.list(identifier, filters={"resource_status": "COMPLETE"})
    assert {e.resource_status for e in complete} == {"CREATE_COMPLETE"}
    of_a = heat.events.list(identifier, resource_name="a")
    assert {e.resource_name for e in of_a} == {"a"}
    event = heat.events.get(identifier, "a", of_a[0].id)
    assert event.resource_type == "OS::Heat::Value"
    with pytest.raises(heat_exc.HTTPNotFound):
        heat.events.list(identifier, resource_name="zzz")
    resources = {r.resource_name: r for r in heat.resources.list(identifier)}
    assert resources["a"].required_by == ["b"]
    shown = heat.resources.get(identifier, "a")
    assert shown.attributes["value"] == "hello"
    assert heat.resources.metadata(identifier, "a") == {"role": "hello"}
    only_b = heat.resources.list(identifier, filters={"type": "OS::Heat::TestResource"})
    assert [r.resource_name for r in only_b] == ["b"]


def test_mark_unhealthy_then_update_replaces(heat: Any) -> None:
    stack = create(heat)
    identifier = f"web/{stack.id}"
    before = heat.resources.get(identifier, "b").physical_resource_id
    heat.resources.mark_unhealthy(identifier, "b", True, "broken disk")
    marked = heat.resources.get(identifier, "b")
    assert marked.resource_status == "CHECK_FAILED"
    assert marked.resource_status_reason == "broken disk"
    heat.stacks.update(identifier, existing=True)
    assert settled(heat, identifier).stack_status == "UPDATE_COMPLETE"
    assert heat.resources.get(identifier, "b").physical_resource_id != before


def test_validate_versions_and_resource_types(heat: Any) -> None:
    result = heat.stacks.validate(template=template())
    assert result["Description"] == "two values and a none"
    assert result["Parameters"]["greeting"]["Default"] == "hello"
    assert result["Parameters"]["count"]["MaxValue"] == 5
    with pytest.raises(heat_exc.HTTPBadRequest, match=r"resources\.a\.properties"):
        heat.stacks.validate(
            template=template(TEMPLATE.replace("{value: {get_param: greeting}}", "{valeu: 1}"))
        )
    nested = {
        "heat_template_version": "2016-10-14",
        "resources": {"inner": {"type": "box.yaml", "properties": {"size": 3}}},
    }
    box = "heat_template_version: 2016-10-14\nparameters:\n  size: {type: number}\n"
    shown = heat.stacks.validate(template=nested, files={"box.yaml": box}, show_nested=True)
    assert shown["NestedParameters"]["inner"]["Parameters"]["size"]["Type"] == "Number"
    versions = [v.version for v in heat.template_versions.list()]
    assert "heat_template_version.2016-10-14" in versions
    functions = [
        f.functions for f in heat.template_versions.get("heat_template_version.2016-10-14")
    ]
    assert "get_param" in functions and "if" in functions
    types = [t.resource_type for t in heat.resource_types.list()]
    assert "OS::Heat::TestResource" in types
    described = heat.resource_types.list(with_description=True)
    assert all(hasattr(t, "description") for t in described)
    assert list(heat.resource_types.list(filters={"support_status": "DEPRECATED"})) == []
    schema = heat.resource_types.get("OS::Heat::TestResource", with_description=True)
    assert schema["properties"]["value"]["update_allowed"] is True
    assert schema["support_status"]["status"] == "SUPPORTED"
    generated = heat.resource_types.generate_template("OS::Heat::Value", template_type="hot")
    assert generated["resources"]["OS::Heat::Value"]["type"] == "OS::Heat::Value"
    with pytest.raises(heat_exc.HTTPNotFound):
        heat.resource_types.get("OS::Nova::Server")


def test_errors_are_heat_shaped(heat: Any, server: RestServer) -> None:
    create(heat)
    with pytest.raises(heat_exc.HTTPConflict):
        heat.stacks.create(stack_name="web", template=template())
    with pytest.raises(heat_exc.HTTPBadRequest, match="template_url is not supported"):
        heat.stacks.create(stack_name="x", template_url="http://example.invalid/t.yaml")
    with pytest.raises(heat_exc.HTTPBadRequest, match="No stack name"):
        heat.stacks.create(template=template())
    # The raw body (heatclient shows only its message): Heat's error document.
    response = httpx.get(
        f"{server.endpoint('alpha')}/stacks/nope", headers={"X-Auth-Token": server.token("alpha")}
    )
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == 404 and body["title"] == "Not Found"
    assert body["error"]["type"] == "EntityNotFound" and "nope" in body["error"]["message"]


def test_nested_depth_reaches_into_provider_templates(heat: Any) -> None:
    box = (
        "heat_template_version: 2016-10-14\n"
        "parameters:\n  word: {type: string}\n"
        "resources:\n  inner: {type: OS::Heat::Value, properties: {value: {get_param: word}}}\n"
        "outputs:\n  said: {value: {get_attr: [inner, value]}}\n"
    )
    outer = {
        "heat_template_version": "2016-10-14",
        "resources": {"box": {"type": "box.yaml", "properties": {"word": "hi"}}},
    }
    stack = create(heat, files={"box.yaml": box}, template=outer)
    assert stack.stack_status == "CREATE_COMPLETE"
    identifier = f"web/{stack.id}"
    assert [r.resource_name for r in heat.resources.list(identifier)] == ["box"]
    deep = {r.resource_name: r for r in heat.resources.list(identifier, nested_depth=1)}
    assert set(deep) == {"box", "inner"}
    assert deep["inner"].parent_resource == "box"
    assert any(link["rel"] == "nested" for link in deep["box"].links)
    shallow_events = {e.resource_name for e in heat.events.list(identifier)}
    deep_events = {e.resource_name for e in heat.events.list(identifier, nested_depth=1)}
    assert "inner" not in shallow_events and "inner" in deep_events
    assert [s.stack_name for s in heat.stacks.list()] == ["web"]
    nested = [s for s in heat.stacks.list(show_nested=True) if s.stack_name != "web"]
    assert len(nested) == 1 and nested[0].parent == stack.id
    # An update preview with show_nested also shows what changes inside the nested stack.
    outer["resources"]["box"]["properties"]["word"] = "yo"
    fields = {"template": outer, "files": {"box.yaml": box}}
    flat = heat.stacks.preview_update(identifier, **fields)["resource_changes"]
    assert [r["resource_name"] for r in flat["updated"]] == ["box"]
    deep_changes = heat.stacks.preview_update(identifier, show_nested=True, **fields)
    updated = {r["resource_name"]: r for r in deep_changes["resource_changes"]["updated"]}
    assert set(updated) == {"box", "inner"}
    assert updated["inner"]["stack_name"] == nested[0].stack_name
    assert updated["box"]["stack_name"] == "web"


def test_an_operation_no_worker_would_do_is_refused(deployment: Deployment) -> None:
    """The API served by an engine-only process while no worker is alive answers 503 to a
    create (Heat's ServiceUnavailable) and stores nothing, as the CLI refuses (exit 7)."""
    api = deployment.serve("--roles", "engine", "--api", "127.0.0.1:0")
    url = wait_for_listening(api)
    with converge_thread(
        lambda: Converge.open(
            deployment.database_url,
            broker_url=deployment.broker_url,
            broker_namespace=deployment.namespace,
            roles=(),
        )
    ) as (loop, cv):
        server = RestServer(loop, cv, url, mode="distributed")
        try:
            heat = heat_client.Client(
                "1", endpoint=server.endpoint("alpha"), token=server.token("alpha")
            )
            with pytest.raises(
                heat_exc.HTTPServiceUnavailable, match="no converge worker is alive"
            ):
                heat.stacks.create(stack_name="web", template=template())
            assert list(heat.stacks.list()) == []
        finally:
            server.close()
