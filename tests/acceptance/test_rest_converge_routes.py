"""converge's own routes: drift, the synchronizer's snapshot, and the change stream (SSE)
resuming from Last-Event-ID so that no event is missed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.rest_server import MODES, RestServer, rest_server_in, wait_for

TEMPLATE = {
    "heat_template_version": "2016-10-14",
    "resources": {
        "first": {"type": "OS::Heat::Value", "properties": {"value": "one"}},
        "second": {"type": "OS::Heat::Value", "properties": {"value": "two"}},
    },
}


@pytest.fixture(params=MODES)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestServer]:
    """Embedded, and ``converge serve`` processes over PostgreSQL and RabbitMQ: there the
    events are written by the worker processes and streamed by the API's."""
    with rest_server_in(request.param, request, tmp_path / "state.db", observe=True) as running:
        yield running


def create(server: RestServer, token: str, name: str) -> str:
    created = server.http.post(
        f"{server.endpoint('alpha')}/stacks",
        headers={"X-Auth-Token": token},
        json={"stack_name": name, "template": TEMPLATE},
    )
    assert created.status_code == 201, created.text
    stack_id: str = created.json()["stack"]["id"]
    return stack_id


def read_stream(
    server: RestServer, token: str, headers: dict[str, str], params: dict[str, str], count: int
) -> list[dict[str, Any]]:
    """The first ``count`` events of the stream, each with its id, kind and data."""
    messages: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    with server.http.stream(
        "GET",
        f"{server.endpoint('alpha')}/converge/events/stream",
        headers={"X-Auth-Token": token, **headers},
        params=params,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("id: "):
                current["id"] = int(line[4:])
            elif line.startswith("event: "):
                current["kind"] = line[7:]
            elif line.startswith("data: "):
                # The server writes id, event, then data: data ends a message (httpx's
                # iter_lines does not yield the blank line between messages).
                current["data"] = json.loads(line[6:])
                messages.append(current)
                current = {}
                if len(messages) == count:
                    break
    return messages


def test_stream_resumes_after_last_event_id_without_a_gap(server: RestServer) -> None:
    token = server.token("alpha")
    stack_id = create(server, token, "web")
    first = read_stream(server, token, {}, {"after": "0"}, 3)
    assert [m["kind"] for m in first] == ["stack", "resource", "resource"]
    assert first[0]["data"]["stack_id"] == stack_id
    # Reconnect as an EventSource does, with the last id it saw.
    rest = read_stream(server, token, {"Last-Event-ID": str(first[-1]["id"])}, {}, 3)
    ids = [m["id"] for m in first + rest]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    every = server.http.get(
        f"{server.endpoint('alpha')}/stacks/web/{stack_id}/events",
        headers={"X-Auth-Token": token},
    ).json()["events"]
    assert [int(e["id"]) for e in every][: len(ids)] == ids  # nothing missed, nothing twice
    assert rest[-1]["kind"] == "stack"
    assert rest[-1]["data"]["resource_status"] == "CREATE_COMPLETE"


def test_live_stream_sees_a_check_drift_and_the_snapshot(server: RestServer) -> None:
    token = server.token("alpha")
    headers = {"X-Auth-Token": token}
    stack_id = create(server, token, "web")
    base = f"{server.endpoint('alpha')}/stacks/web/{stack_id}"

    def complete() -> bool:
        shown = server.http.get(base, headers=headers).json()["stack"]
        return bool(shown["stack_status"] == "CREATE_COMPLETE")

    wait_for(complete)
    last = int(server.http.get(f"{base}/events", headers=headers).json()["events"][-1]["id"])
    accepted = server.http.post(f"{base}/actions", headers=headers, json={"check": None})
    assert accepted.status_code == 202
    messages = read_stream(server, token, {"Last-Event-ID": str(last)}, {"stack": "web"}, 4)
    assert messages[0]["data"]["resource_status"] == "CHECK_IN_PROGRESS"
    assert {m["kind"] for m in messages[1:3]} == {"drift"}
    drift = server.http.get(
        f"{server.endpoint('alpha')}/converge/stacks/web/drift", headers=headers
    ).json()
    assert {d["resource_name"]: d["drift_status"] for d in drift["drift"]} == {
        "first": "IN_SYNC",
        "second": "IN_SYNC",
    }

    def sampled() -> bool:
        snapshot = server.http.get(
            f"{server.endpoint('alpha')}/converge/snapshot/OS::Heat::Value", headers=headers
        ).json()
        return len(snapshot["entities"]) == 2 and snapshot["seq"] >= 2

    wait_for(sampled)
    # Another project's snapshot of the same type holds none of alpha's entities.
    other = server.http.get(
        f"{server.endpoint('beta')}/converge/snapshot/OS::Heat::Value",
        headers={"X-Auth-Token": server.token("beta")},
    ).json()
    assert other["entities"] == []
