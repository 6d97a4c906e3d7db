"""The reality commands end to end: check, drift, world, apply --converge, and serve."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from converge.cli.drift_commands import register as register_drift
from converge.cli.stack_commands import register as register_stack
from converge.resources.builtin.world import TestWorld, world_path_for

TEMPLATE = """\
heat_template_version: 2021-04-16
resources:
  first: {type: OS::Heat::TestResource, properties: {value: hello}}
  second: {type: OS::Heat::Value, properties: {value: v1}}
"""

Run = Callable[..., Result]


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    @click.group()
    def group() -> None:
        """converge, as main.py builds it."""

    register_stack(group)
    register_drift(group)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVERGE_STATE", str(tmp_path / "state.db"))
    (tmp_path / "demo.yaml").write_text(TEMPLATE)

    def invoke(*args: str) -> Result:
        return CliRunner().invoke(group, list(args), catch_exceptions=False)

    return invoke


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def first_id(run: Run) -> str:
    resources = as_json(run("resources", "demo", "-f", "json"))
    return next(r["physical_resource_id"] for r in resources if r["resource_name"] == "first")


def test_check_drift_world_and_converge(run: Run, tmp_path: Path) -> None:
    as_json(run("apply", "demo.yaml", "-f", "json"))
    checked = as_json(run("check", "demo", "-f", "json"))
    assert checked["stack_status"] == "CHECK_COMPLETE"
    assert {r["drift_status"] for r in checked["resources"]} == {"IN_SYNC"}

    pid = first_id(run)
    changed = run("world", "set", "OS::Heat::TestResource", pid, "value=theirs")
    assert changed.exit_code == 0, changed.stderr
    shown = as_json(run("world", "show", "-f", "json"))
    assert shown["OS::Heat::TestResource"][pid]["properties"]["value"] == "theirs"
    checked = as_json(run("check", "demo", "-f", "json"))
    drift = {r["resource_name"]: r for r in checked["resources"]}
    assert drift["first"]["drift_status"] == "MODIFIED"
    assert drift["first"]["drift_detail"] == {"value": {"wanted": "hello", "found": "theirs"}}
    table = run("drift", "demo")
    assert "MODIFIED" in table.stdout and "hello / theirs" in table.stdout
    assert as_json(run("drift", "demo", "-f", "json")) == checked["resources"]

    missing = run("world", "delete", "OS::Heat::TestResource", "nope")
    assert missing.exit_code == 3 and "no OS::Heat::TestResource 'nope'" in missing.stderr

    corrected = as_json(run("apply", "demo.yaml", "--converge", "-f", "json"))
    assert corrected["stack_status"] == "UPDATE_COMPLETE"
    live = TestWorld(world_path_for(tmp_path / "state.db")).get("OS::Heat::TestResource", pid)
    assert live is not None and live["properties"]["value"] == "hello"
    assert {r["drift_status"] for r in as_json(run("drift", "demo", "-f", "json"))} == {"IN_SYNC"}


def test_show_has_the_drift_policy(run: Run) -> None:
    as_json(run("apply", "demo.yaml", "--drift-policy", "heal", "-f", "json"))
    assert as_json(run("show", "demo", "-f", "json"))["drift_policy"] == "heal"


_PROGRAM = "from converge.cli.main import main\nmain()\n"


def test_serve_heals_changes_made_by_another_process(run: Run, tmp_path: Path) -> None:
    as_json(run("apply", "demo.yaml", "--drift-policy", "heal", "-f", "json"))
    pid = first_id(run)
    world = TestWorld(world_path_for(tmp_path / "state.db"))
    env = {**os.environ, "CONVERGE_STATE": str(tmp_path / "state.db"), "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-c", _PROGRAM, "serve", "--interval", "0.1", "--recheck", "0.1"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        assert "converge serve: watching" in server.stderr.readline()
        assert run("world", "set", "OS::Heat::TestResource", pid, "value=theirs").exit_code == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            live = world.get("OS::Heat::TestResource", pid)
            if live is not None and live["properties"]["value"] == "hello":
                break
            time.sleep(0.05)
        assert world.get("OS::Heat::TestResource", pid)["properties"]["value"] == "hello"
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=30)
    finally:
        server.kill()
    assert server.returncode == 0, stderr
    assert "Traceback" not in stderr
    events = as_json(run("events", "demo", "-r", "first", "-f", "json"))
    assert any(e["resource_status_reason"].startswith("Healing drift") for e in events)


FILES = """\
heat_template_version: 2021-04-16
parameters:
  token: {type: string, hidden: true, default: s3cr3t-token}
resources:
  page:
    type: Local::File
    properties: {path: page.txt, content: "<h1>Hello</h1>\\nline two\\n"}
  conf:
    type: Local::File
    properties:
      path: app.conf
      content: {str_replace: {template: "token = T\\n", params: {T: {get_param: token}}}}
"""


def test_drift_of_a_file_shows_a_content_diff_but_never_a_hidden_value(
    run: Run, tmp_path: Path
) -> None:
    (tmp_path / "files.yaml").write_text(FILES)
    as_json(run("apply", "files.yaml", "-f", "json"))
    (tmp_path / "page.txt").write_text("<h1>Defaced</h1>\nline two\n")
    (tmp_path / "app.conf").write_text("token = s3cr3t-token\nextra = added-by-hand\n")

    checked = run("check", "files", "-c", "resource_name", "-c", "drift_diff", "-f", "json")
    diffs = {r["resource_name"]: r["drift_diff"] for r in as_json(checked)}
    assert diffs["page"]["content_sha256"].splitlines() == [
        "--- wanted",
        "+++ found",
        "@@ -1,2 +1,2 @@",
        "-<h1>Hello</h1>",
        "+<h1>Defaced</h1>",
        " line two",
    ]
    assert diffs["conf"] == {}  # its content holds a hidden parameter's value

    table = run("drift", "files")
    assert table.exit_code == 0, table.stderr
    assert "content_sha256: differs, see the diff below" in table.stdout
    assert "page content_sha256, as observed now (- wanted, + found):" in table.stdout
    assert "+<h1>Defaced</h1>" in table.stdout
    assert "s3cr3t" not in table.stdout and "added-by-hand" not in table.stdout
    assert "s3cr3t" not in run("drift", "files", "-f", "json").stdout
    as_yaml = run("drift", "files", "-f", "yaml", "-c", "drift_diff").stdout
    assert "content_sha256: |-\n      --- wanted\n      +++ found\n" in as_yaml  # readable

    # -c as on the other commands, table and value alike.
    chosen = run("drift", "files", "-c", "resource_name", "-c", "drift_status", "-f", "value")
    assert chosen.stdout.splitlines() == ["conf MODIFIED", "page MODIFIED"]
    unknown = run("check", "files", "-c", "nope")
    assert unknown.exit_code == 2 and "no column 'nope'" in unknown.stderr
