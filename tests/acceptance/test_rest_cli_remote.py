"""The CLI against a server: ``converge --url … --token …`` runs the commands through the API,
with progress from the change stream and the same ``-f json`` documents."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from converge.cli.main import main
from support.rest_server import MODES, RestServer, rest_server_in

TEMPLATE = """\
heat_template_version: 2018-08-31
parameters:
  greeting: {type: string, default: hello}
resources:
  first:
    type: OS::Heat::TestResource
    properties: {value: {get_param: greeting}}
  second: {type: OS::Heat::None, depends_on: first}
outputs:
  said: {value: {get_attr: [first, output]}}
"""


@pytest.fixture(params=MODES)
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RestServer]:
    """Embedded, and ``converge serve`` processes over PostgreSQL and RabbitMQ: there the
    progress lines are events the worker processes wrote."""
    with rest_server_in(request.param, request, tmp_path / "server.db") as running:
        yield running


def test_apply_read_and_destroy_through_the_api(tmp_path: Path, server: RestServer) -> None:
    template = tmp_path / "web.yaml"
    template.write_text(TEMPLATE)
    local_state = tmp_path / "local.db"
    token = server.token("alpha")
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(
            main,
            ["--url", server.url, "--token", token, *args, "--state", str(local_state)],
            catch_exceptions=False,
        )

    applied = run("apply", str(template), "-P", "greeting=hi")
    assert applied.exit_code == 0, applied.output
    # Progress lines come from the change stream, in order, ending with the stack's.
    lines = [line for line in applied.output.splitlines() if "  " in line]
    assert "web  CREATE_IN_PROGRESS" in lines[0]
    assert "Stack web CREATE_COMPLETE" in applied.output
    shown = json.loads(run("show", "web", "-f", "json").output)
    assert shown["stack_status"] == "CREATE_COMPLETE"
    assert shown["parameters"] == {"greeting": "hi"}
    assert [s["stack_name"] for s in json.loads(run("list", "-f", "json").output)] == ["web"]
    resources = json.loads(run("resources", "web", "-f", "json").output)
    assert sorted(r["resource_name"] for r in resources) == ["first", "second"]
    events = json.loads(run("events", "web", "-f", "json").output)
    assert events[-1]["resource_status"] == "CREATE_COMPLETE"
    outputs = json.loads(run("outputs", "web", "-f", "json").output)
    assert outputs[0]["output_value"] == "hi"
    checked = json.loads(run("check", "web", "-f", "json").output)
    assert checked["stack_status"] == "CHECK_COMPLETE"
    drift = json.loads(run("drift", "web", "-f", "json").output)
    assert {d["resource_name"]: d["drift_status"] for d in drift} == {
        "first": "IN_SYNC",
        "second": "IN_SYNC",
    }
    updated = json.loads(run("apply", str(template), "-P", "greeting=yo", "-f", "json").output)
    assert updated["stack_status"] == "UPDATE_COMPLETE"
    assert {r["resource_name"] for r in updated["resources"]} == {"first", "second"}
    destroyed = run("destroy", "web", "--yes")
    assert destroyed.exit_code == 0, destroyed.output
    assert json.loads(run("list", "-f", "json").output) == []
    missing = run("show", "web")
    assert missing.exit_code == 3 and "not found" in missing.output
    refused = runner.invoke(main, ["--url", server.url, "--token", "wrong", "list"])
    assert refused.exit_code == 2 and "refused" in refused.output
    assert not local_state.exists()  # nothing was written locally


def test_a_server_that_cannot_be_reached_is_unavailable(tmp_path: Path) -> None:
    """Nothing listens at the URL: exit 7 (try again later), as for an unreachable broker,
    not 1 (the operation failed)."""
    result = CliRunner().invoke(
        main,
        ["--url", "http://127.0.0.1:1", "--token", "t", "list", "--state", str(tmp_path / "s.db")],
    )
    assert result.exit_code == 7, result.output
    assert "cannot reach the converge server at http://127.0.0.1:1/" in result.output
