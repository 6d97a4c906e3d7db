"""Projects and tokens: every route, two projects, nothing of one visible to the other."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from converge.rest.app import create_app
from support.rest_server import RestServer, rest_server, wait_for

TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {"secret_thing": {"type": "OS::Heat::Value", "properties": {"value": "v"}}},
    "outputs": {"out": {"value": {"get_attr": ["secret_thing", "value"]}}},
}


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestServer]:
    with rest_server(tmp_path / "state.db") as running:
        yield running


def call(
    server: RestServer, method: str, path: str, token: str | None, **kwargs: Any
) -> httpx.Response:
    headers = {"X-Auth-Token": token} if token else {}
    return server.http.request(
        method, server.url + path, headers=headers, follow_redirects=False, **kwargs
    )


def make_stack(server: RestServer, project: str, token: str, name: str) -> dict[str, Any]:
    created = call(
        server,
        "POST",
        f"/v1/{project}/stacks",
        token,
        json={"stack_name": name, "template": TEMPLATE},
    )
    assert created.status_code == 201, created.text
    stack_id = created.json()["stack"]["id"]

    def complete() -> bool:
        shown = call(server, "GET", f"/v1/{project}/stacks/{name}/{stack_id}", token)
        return bool(shown.json()["stack"]["stack_status"] == "CREATE_COMPLETE")

    wait_for(complete)
    return {"stack_id": stack_id, "stack_name": name}


def _routes(server: RestServer) -> list[tuple[str, str]]:
    """Every route, as the served OpenAPI description lists them."""
    paths = create_app(server.cv).openapi()["paths"]
    return [
        (method.upper(), path)
        for path, operations in paths.items()
        if path.startswith("/v1/{tenant_id}/")
        for method in operations
    ]


def _fill(path: str, values: dict[str, str]) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values[m.group(1)], path)


def _events_of(server: RestServer, project: str, token: str, stack: dict[str, Any]) -> Any:
    response = call(
        server,
        "GET",
        f"/v1/{project}/stacks/{stack['stack_name']}/{stack['stack_id']}/events",
        token,
    )
    return response.json()["events"]


def test_every_route_hides_one_projects_stacks_from_another(server: RestServer) -> None:
    alpha = server.token("alpha")
    beta = server.token("beta")
    stack = make_stack(server, "alpha", alpha, "alpha-stack")
    events_before = _events_of(server, "alpha", alpha, stack)
    first_event = events_before[0]["id"]
    values = {
        "tenant_id": "beta",
        "stack_name": stack["stack_name"],
        "stack_id": stack["stack_id"],
        "resource_name": "secret_thing",
        "event_id": first_event,
        "output_key": "out",
        "type_name": "OS::Heat::Value",
        "template_version": "heat_template_version.2016-10-14",
    }
    checked = 0
    for method, path in _routes(server):
        if path.endswith("/events/stream"):
            continue  # a stream never ends: test_change_stream_is_per_project covers it
        url = _fill(path, values)
        body: Any = {"stack_name": "x", "template": TEMPLATE, "check": None}
        response = call(server, method, url, beta, json=body if method != "GET" else None)
        uses_stack = "{stack_name}" in path
        if uses_stack:
            # Not found; or a body of the wrong shape for this route, refused before any
            # stack is looked at (the sweep sends one body to every route).
            shape = response.status_code == 400 and response.json()["error"]["type"] == (
                "HTTPBadRequest"
            )
            assert response.status_code == 404 or shape, (method, path, response.text)
        if response.status_code != 404:  # a 404 may repeat the name it was asked for
            assert stack["stack_id"] not in response.text, (method, path)
            assert "alpha-stack" not in response.text, (method, path)
        # The same request at alpha's URL with beta's token is forbidden, whatever it is.
        forbidden = call(server, method, _fill(path, {**values, "tenant_id": "alpha"}), beta)
        assert forbidden.status_code == 403, (method, path, forbidden.status_code)
        assert forbidden.json()["error"]["type"] == "Forbidden"
        checked += 1
    assert checked >= 30
    # beta's POST /stacks made beta's own stack; alpha's is untouched.
    shown = call(server, "GET", f"/v1/alpha/stacks/alpha-stack/{stack['stack_id']}", alpha)
    assert shown.json()["stack"]["stack_status"] == "CREATE_COMPLETE"
    assert _events_of(server, "alpha", alpha, stack) == events_before
    listed = call(server, "GET", "/v1/alpha/stacks", alpha).json()["stacks"]
    assert [s["stack_name"] for s in listed] == ["alpha-stack"]


def test_tokens_roles_and_no_token(server: RestServer) -> None:
    member = server.token("alpha")
    reader = server.token("alpha", "reader")
    admin = server.token("ops", "admin")
    stack = make_stack(server, "alpha", member, "s1")
    path = f"/v1/alpha/stacks/s1/{stack['stack_id']}"
    assert call(server, "GET", path, reader).status_code == 200
    for method, url, body in [
        ("DELETE", path, None),
        ("PATCH", path, {}),
        ("POST", f"{path}/actions", {"check": None}),
        ("POST", "/v1/alpha/stacks", {"stack_name": "s2", "template": TEMPLATE}),
    ]:
        refused = call(server, method, url, reader, json=body)
        assert refused.status_code == 403, (method, url)
        assert "reader" in refused.json()["error"]["message"]
    assert call(server, "GET", path, None).status_code == 401
    assert call(server, "GET", path, "not-a-token").status_code == 401
    # An admin token acts in any project (Heat's admin context).
    assert call(server, "GET", path, admin).json()["stack"]["stack_name"] == "s1"
    # A revoked token is refused from then on.
    tokens = server.run(lambda cv: cv.list_tokens("alpha"))
    reader_id = next(t.id for t in tokens if t.role == "reader")
    server.run(lambda cv: cv.revoke_token(reader_id))
    assert call(server, "GET", path, reader).status_code == 401
    assert call(server, "GET", path, member).status_code == 200


def test_change_stream_is_per_project(server: RestServer) -> None:
    alpha = server.token("alpha")
    beta = server.token("beta")
    make_stack(server, "alpha", alpha, "a1")
    make_stack(server, "beta", beta, "b1")
    seen: dict[str, list[str]] = {}
    for project, token in (("alpha", alpha), ("beta", beta)):
        lines: list[str] = []
        with httpx.stream(
            "GET",
            f"{server.url}/v1/{project}/converge/events/stream?after=0",
            headers={"X-Auth-Token": token},
            timeout=20,
        ) as response:
            assert response.status_code == 200
            for line in response.iter_lines():
                lines.append(line)
                stack_done = '"resource_type": "OS::Heat::Stack"' in line and "COMPLETE" in line
                if line.startswith("data:") and stack_done:
                    break
        seen[project] = [line for line in lines if line.startswith("data:")]
    assert seen["alpha"] and all('"stack_name": "a1"' in line for line in seen["alpha"])
    assert seen["beta"] and all('"stack_name": "b1"' in line for line in seen["beta"])
