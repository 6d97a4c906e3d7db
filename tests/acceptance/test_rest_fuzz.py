"""Bad input: schemathesis generates requests from the served OpenAPI description for every
operation (a bounded number of examples each). No answer may be a 500, every error must be
Heat's error body, and no rejected request may touch the stack its URL names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.rest_server import RestServer, rest_server, wait_for

EXAMPLES = 4  # per operation: the whole run stays within seconds

TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {"thing": {"type": "OS::Heat::Value", "properties": {"value": "v"}}},
    "outputs": {"out": {"value": {"get_attr": ["thing", "value"]}}},
}


def _make_target(server: RestServer, token: str) -> tuple[str, str]:
    created = server.http.post(
        f"{server.endpoint('alpha')}/stacks",
        headers={"X-Auth-Token": token},
        json={"stack_name": "target", "template": TEMPLATE},
    )
    assert created.status_code == 201, created.text
    stack_id = created.json()["stack"]["id"]
    wait_for(lambda: _state(server, stack_id)[0] == "CREATE_COMPLETE")
    return "target", stack_id


def _state(server: RestServer, stack_id: str) -> tuple[str, int]:
    """The stack's state and its newest event id: what a rejected request must not change."""

    async def read(cv: Any) -> tuple[str, int]:
        stack = await cv.for_project("alpha").get_stack(stack_id, include_deleted=True)
        events = await cv.for_project("alpha").list_events(stack_id)
        return stack.stack_status, events[-1].id if events else 0

    state: tuple[str, int] = server.run(read)
    return state


def test_generated_requests_get_no_500_and_rejected_ones_change_nothing(tmp_path: Path) -> None:
    with rest_server(tmp_path / "state.db") as server:
        token = server.token("alpha")
        stack_name, stack_id = _make_target(server, token)
        description = server.http.get(f"{server.url}/openapi.json").json()
        schema = schemathesis.openapi.from_dict(description)
        fixed = {
            "tenant_id": "alpha",
            "stack_name": stack_name,
            "stack_id": stack_id,
            "resource_name": "thing",
            "output_key": "out",
        }
        calls = 0
        for result in schema.get_all_operations():
            operation = result.ok()
            if operation.path.endswith("/events/stream") or operation.method.upper() == "DELETE":
                continue  # a stream never ends; deleting the target ends the run's purpose

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(), pin=st.booleans())
            def check(case: Any, pin: bool) -> None:
                nonlocal calls
                # Half the cases name the real project and stack, so the fuzzing reaches
                # past the lookups; the others keep whatever was generated.
                if pin and case.path_parameters:
                    for key, value in fixed.items():
                        if key in case.path_parameters:
                            case.path_parameters[key] = value
                pinned = pin and case.path_parameters.get("stack_id") == stack_id
                before = _state(server, stack_id) if pinned else None
                path = case.formatted_path
                body = case.body if not isinstance(case.body, schemathesis.core.NotSet) else None
                response = server.http.request(
                    case.method,
                    server.url + path,
                    params=case.query,
                    headers={**(case.headers or {}), "X-Auth-Token": token},
                    json=body,
                )
                calls += 1
                assert response.status_code < 500, (case.method, path, body, response.text)
                if response.status_code >= 400:
                    error = response.json()
                    assert error["code"] == response.status_code and "message" in error["error"]
                    if before is not None:
                        assert _state(server, stack_id) == before, (case.method, path, body)
                elif case.method != "GET":
                    # An accepted change (a PATCH with nothing in it is valid): let it
                    # settle, so the next case starts from a stable stack.
                    wait_for(lambda: not _state(server, stack_id)[0].endswith("IN_PROGRESS"))

            check()
        assert calls >= 120
