"""Two `converge apply` processes on one state file: the newer operation wins, the one it
superseded exits with its own code and says so, and two creates of one name never crash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
from click.testing import CliRunner, Result

from converge.cli.boundary import EXIT_CONFLICT, EXIT_OK, EXIT_SUPERSEDED
from converge.cli.stack_commands import register

TEMPLATE = """\
heat_template_version: 2018-08-31
parameters:
  wait: {type: number, default: 0}
  value: {type: string, default: one}
resources:
  slow:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: value}
      wait_secs: {get_param: wait}
  after:
    type: OS::Heat::TestResource
    properties:
      value: {get_attr: [slow, output]}
"""

_PROGRAM = (
    "import click\n"
    "from converge.cli.stack_commands import register\n"
    "group = click.Group('converge')\n"
    "register(group)\n"
    "group()\n"
)


def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _PROGRAM, *args],
        cwd=tmp_path,
        env={**os.environ, "CONVERGE_STATE": str(tmp_path / "state.db"), "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _in_process(tmp_path: Path, *args: str) -> Result:
    """A quick command in this process (no interpreter to start) on the same state file."""

    @click.group()
    def group() -> None:
        pass

    register(group)
    return CliRunner().invoke(
        group, [*args, "--state", str(tmp_path / "state.db")], catch_exceptions=False
    )


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    return process.returncode, stdout, stderr


def test_superseded_apply_says_so_and_exits_with_its_code(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(TEMPLATE)
    (tmp_path / "pause.yaml").write_text(
        "resource_registry:\n  resources:\n    after:\n      hooks: pre-update\n"
    )
    created = _in_process(tmp_path, "apply", str(tmp_path / "r.yaml"))
    assert created.exit_code == EXIT_OK, created.stderr
    # The older update stops at a breakpoint, so the newer one surely starts before it ends.
    older = _start(tmp_path, "apply", "r.yaml", "-e", "pause.yaml", "-P", "value=older")
    assert older.stdout is not None
    deadline = time.monotonic() + 60
    line = ""
    while "paused until Hook pre-update" not in line and time.monotonic() < deadline:
        line = older.stdout.readline()
    assert "paused until Hook pre-update" in line
    newer = _start(tmp_path, "apply", "r.yaml", "-P", "value=newer", "-f", "json")
    newer_code, newer_out, newer_err = _finish(newer)
    older_code, older_out, older_err = _finish(older)

    assert newer_code == EXIT_OK, newer_err
    document = json.loads(newer_out)
    assert document["stack_status"] == "UPDATE_COMPLETE"
    values = {r["resource_name"]: r["attributes"].get("output") for r in document["resources"]}
    assert document["parameters"]["value"] == "newer"
    assert older_code == EXIT_SUPERSEDED, (older_out, older_err)
    assert "error: the update of stack r was superseded by a newer operation" in older_err
    assert "Stack r UPDATE_COMPLETE" not in older_out  # no verdict of success
    assert "Traceback" not in older_err + newer_err
    shown = _in_process(tmp_path, "resources", "r", "-f", "json")
    resources = {r["resource_name"]: r for r in json.loads(shown.stdout)}
    assert resources["slow"]["properties"]["value"] == "newer", values


def test_two_creates_of_one_name_one_wins_the_other_gets_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(TEMPLATE)
    for round_ in range(1):
        state = f"round{round_}.db"
        first = _start(tmp_path, "apply", "r.yaml", "--state", state, "-P", "value=a")
        second = _start(tmp_path, "apply", "r.yaml", "--state", state, "-P", "value=b")
        results = [_finish(first), _finish(second)]
        codes = sorted(code for code, _, _ in results)
        errors = " ".join(err for _, _, err in results)
        assert "Traceback" not in errors and "internal error" not in errors, errors
        # One wins; the other was refused (the name is taken or still being created) or
        # was superseded by the winner's update.
        assert codes[0] == EXIT_OK, results
        assert codes[1] in (EXIT_OK, EXIT_CONFLICT, EXIT_SUPERSEDED), results
        if codes[1] == EXIT_CONFLICT:
            assert "already exists" in errors or "being created by another operation" in errors
        if codes[1] == EXIT_SUPERSEDED:
            assert "superseded by a newer operation" in errors
