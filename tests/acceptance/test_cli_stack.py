"""The embedded CLI end to end: apply, plan, destroy and the reading commands on a SQLite file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner, Result

from converge.cli.stack_commands import register
from converge.resources.builtin.world import TestWorld, world_path_for

TEMPLATE = """\
heat_template_version: 2018-08-31
parameters:
  greeting:
    type: string
    default: hello
resources:
  first:
    type: OS::Heat::TestResource
    properties:
      value: {get_param: greeting}
  second:
    type: OS::Heat::None
    depends_on: first
  secret:
    type: OS::Heat::RandomString
    properties:
      length: 12
outputs:
  said:
    description: what first stored
    value: {get_attr: [first, output]}
  secret:
    value: {get_attr: [secret, value]}
"""

Run = Callable[..., Result]


@pytest.fixture
def converge() -> click.Group:
    @click.group()
    def group() -> None:
        """converge, as main.py builds it."""

    register(group)
    return group


@pytest.fixture
def run(converge: click.Group, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONVERGE_STATE", str(tmp_path / "state.db"))
    for name in ("CONVERGE_DEBUG", "CONVERGE_LOG_JSON"):
        monkeypatch.delenv(name, raising=False)

    def invoke(*args: str, input: str | None = None) -> Result:
        return CliRunner().invoke(converge, list(args), input=input, catch_exceptions=False)

    return invoke


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def as_json(result: Result) -> Any:
    assert result.stdout, result.stderr
    return json.loads(result.stdout)


def by_name(resources: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["resource_name"]: r for r in resources}


def outputs(document: dict[str, Any]) -> dict[str, Any]:
    return {o["output_key"]: o["output_value"] for o in document["outputs"]}


def test_apply_creates_then_updates_and_reports_heat_fields(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)

    created = run("apply", "demo.yaml", "-f", "json")
    assert created.exit_code == 0, created.stderr
    document = as_json(created)
    assert document["stack_name"] == "demo"  # the template file's stem
    assert document["stack_status"] == "CREATE_COMPLETE"
    resources = by_name(document["resources"])
    assert set(resources) == {"first", "second", "secret"}
    assert {r["resource_status"] for r in resources.values()} == {"CREATE_COMPLETE"}
    assert all(r["physical_resource_id"] for r in resources.values())
    assert outputs(document)["said"] == "hello"
    assert len(outputs(document)["secret"]) == 12

    updated = run("apply", "demo.yaml", "-P", "greeting=bye=now", "-f", "json")
    assert updated.exit_code == 0, updated.stderr
    document = as_json(updated)
    assert document["stack_status"] == "UPDATE_COMPLETE"
    assert document["id"] == as_json(created)["id"]
    assert outputs(document)["said"] == "bye=now"
    assert outputs(document)["secret"] == outputs(as_json(created))["secret"]
    after = by_name(document["resources"])
    # value is update_allowed: the same resource, changed in place; the string is kept.
    assert after["first"]["physical_resource_id"] == resources["first"]["physical_resource_id"]
    assert after["secret"]["physical_resource_id"] == resources["secret"]["physical_resource_id"]

    listed = as_json(run("list", "-f", "json"))
    assert [(s["stack_name"], s["stack_status"]) for s in listed] == [("demo", "UPDATE_COMPLETE")]


def test_table_output_shows_events_then_the_reading_commands(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    applied = run("apply", "demo.yaml", "--name", "web-1")
    assert applied.exit_code == 0, applied.stderr
    assert "first  CREATE_COMPLETE" in applied.stdout  # events, one line each
    assert applied.stdout.count("first  CREATE_COMPLETE") == 1
    assert "Stack web-1 CREATE_COMPLETE" in applied.stdout
    assert "said" in applied.stdout and "hello" in applied.stdout  # the outputs table

    shown = as_json(run("show", "web-1", "-f", "json"))
    assert shown["stack_status"] == "CREATE_COMPLETE"
    assert shown["parameters"]["greeting"] == "hello"
    assert "web-1" in run("show", "web-1").stdout

    resources = by_name(as_json(run("resources", "web-1", "-f", "json")))
    assert resources["second"]["resource_type"] == "OS::Heat::None"
    assert resources["first"]["required_by"] == ["second"]

    events = as_json(run("events", "web-1", "-f", "json", "--resource", "first"))
    assert [e["resource_status"] for e in events] == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert {e["resource_name"] for e in events} == {"first"}

    said = {o["output_key"]: o for o in as_json(run("outputs", "web-1", "-f", "json"))}
    assert said["said"]["output_value"] == "hello"
    assert said["said"]["description"] == "what first stored"
    assert "secret" in run("outputs", "web-1").stdout


def test_output_for_pipes_and_scripts(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    assert run("apply", "demo.yaml").exit_code == 0

    # Not a terminal: one whole line per event, so `| tail -5` shows five events.
    lines = run("events", "demo").stdout.splitlines()
    events = as_json(run("events", "demo", "-f", "json"))
    assert len(lines) == len(events)
    assert all(not set(line) & set("│┃┏━") for line in lines)
    assert re.match(r"\d\d:\d\d:\d\d  demo  CREATE_COMPLETE  Stack CREATE completed", lines[-1])
    # Tables too: a header line, then one line a resource, nothing cut.
    table = run("resources", "demo").stdout.splitlines()
    assert table[0].split() == [
        "resource_name",
        "resource_type",
        "resource_status",
        "physical_resource_id",
        "drift_status",
        "updated_time",
    ]
    assert len(table) == 4

    # One output's value alone, for $(...); yaml and -c as openstack users expect.
    assert run("outputs", "demo", "said", "-f", "value").stdout == "hello\n"
    assert run("outputs", "demo", "said").stdout == "hello\n"
    missing = run("outputs", "demo", "nope")
    assert missing.exit_code == 3
    assert "stack demo has no output 'nope' (its outputs: said, secret)" in missing.stderr
    assert run("show", "demo", "-f", "value", "-c", "stack_status").stdout == "CREATE_COMPLETE\n"
    listed = yaml.safe_load(run("resources", "demo", "-f", "yaml").stdout)
    assert {r["resource_name"] for r in listed} == {"first", "second", "secret"}
    rows = run("list", "-f", "value", "-c", "stack_name", "-c", "stack_status").stdout
    assert rows == "demo CREATE_COMPLETE\n"
    chosen = run("resources", "demo", "-c", "resource_name", "-c", "resource_status").stdout
    assert chosen.splitlines()[0].split() == ["resource_name", "resource_status"]
    assert "second  CREATE_COMPLETE" in chosen
    unknown = run("show", "demo", "-c", "statuss")
    assert unknown.exit_code == 2 and "no column 'statuss'" in unknown.stderr


def test_plan_shows_each_kind_of_change_and_changes_nothing(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    before = as_json(run("plan", "demo.yaml", "-f", "json"))
    assert before["exists"] is False
    assert {c["resource_name"]: c["action"] for c in before["changes"]} == {
        "first": "CREATE",
        "second": "CREATE",
        "secret": "CREATE",
    }
    assert as_json(run("list", "-f", "json")) == []
    assert run("apply", "demo.yaml").exit_code == 0

    changed = (
        TEMPLATE.replace("      length: 12", "      length: 20")  # not update_allowed: replace
        .replace("  second:\n    type: OS::Heat::None\n    depends_on: first\n", "")
        .replace("outputs:", "  third:\n    type: OS::Heat::None\noutputs:")
    )
    write(tmp_path / "demo.yaml", changed)
    planned = run("plan", "demo.yaml", "-P", "greeting=hi", "-f", "json")
    assert planned.exit_code == 0, planned.stderr
    actions = {c["resource_name"]: c["action"] for c in as_json(planned)["changes"]}
    assert actions == {
        "first": "UPDATE",
        "secret": "REPLACE",
        "second": "DELETE",
        "third": "CREATE",
    }
    table = run("plan", "demo.yaml", "-P", "greeting=hi")
    assert "Plan: 1 to create, 1 to update, 1 to replace, 1 to delete, 0 unchanged." in table.stdout

    # Nothing was changed by planning.
    shown = as_json(run("show", "demo", "-f", "json"))
    assert shown["stack_status"] == "CREATE_COMPLETE"
    assert set(by_name(as_json(run("resources", "demo", "-f", "json")))) == {
        "first",
        "second",
        "secret",
    }


def test_plan_shows_old_and_new_values_and_a_detailed_exit_code(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    assert run("plan", "demo.yaml", "--detailed-exitcode").exit_code == 2  # all to create
    assert run("apply", "demo.yaml").exit_code == 0
    unchanged = run("plan", "demo.yaml", "--detailed-exitcode")
    assert unchanged.exit_code == 0, unchanged.stderr
    assert "0 to update" in unchanged.stdout

    planned = run("plan", "demo.yaml", "-P", "greeting=bye", "--detailed-exitcode")
    assert planned.exit_code == 2
    assert "value: hello → bye" in planned.stdout
    (first,) = [
        c
        for c in as_json(run("plan", "demo.yaml", "-P", "greeting=bye", "-f", "json"))["changes"]
        if c["resource_name"] == "first"
    ]
    assert first["property_changes"] == {"value": {"old": "hello", "new": "bye"}}


def test_plan_converge_sees_drift_as_apply_converge_decides(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    assert run("apply", "demo.yaml").exit_code == 0
    first = by_name(as_json(run("resources", "demo", "-f", "json")))["first"]
    world = TestWorld(world_path_for(tmp_path / "state.db"))
    world.set_property("OS::Heat::TestResource", first["physical_resource_id"], "value", "theirs")

    blind = as_json(run("plan", "demo.yaml", "-f", "json"))
    assert {c["resource_name"]: c["action"] for c in blind["changes"]}["first"] == "NOTHING"
    seen = run("plan", "demo.yaml", "--converge", "--detailed-exitcode")
    assert seen.exit_code == 2, seen.stderr
    assert "value: theirs → hello" in seen.stdout
    # apply --converge does what plan --converge showed, and then there is nothing to do.
    assert run("apply", "demo.yaml", "--converge").exit_code == 0
    live = world.get("OS::Heat::TestResource", first["physical_resource_id"])
    assert live is not None and live["properties"]["value"] == "hello"
    assert run("plan", "demo.yaml", "--converge", "--detailed-exitcode").exit_code == 0


def test_a_saved_plan_applies_only_while_it_still_holds(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    assert run("apply", "demo.yaml").exit_code == 0
    saved = run("plan", "demo.yaml", "-P", "greeting=bye", "-o", "bye.plan")
    assert saved.exit_code == 0 and "converge apply bye.plan" in saved.stdout
    assert oct((tmp_path / "bye.plan").stat().st_mode & 0o777) == "0o600"
    stale = run("plan", "demo.yaml", "-P", "greeting=later", "-o", "later.plan")
    assert stale.exit_code == 0
    # The template file changes after planning: the plan runs what was reviewed.
    write(tmp_path / "demo.yaml", TEMPLATE.replace("default: hello", "default: other"))

    applied = run("apply", "bye.plan", "-f", "json")
    assert applied.exit_code == 0, applied.stderr
    assert outputs(as_json(applied))["said"] == "bye"
    # The stack changed since later.plan was made: it is refused, nothing changes.
    refused = run("apply", "later.plan")
    assert refused.exit_code == 4
    assert "the plan in later.plan is out of date: stack demo changed" in refused.stderr
    assert outputs(as_json(run("show", "demo", "-f", "json")))["said"] == "bye"
    mixed = run("apply", "bye.plan", "-P", "greeting=x")
    assert mixed.exit_code == 2 and "a saved plan carries its inputs" in mixed.stderr


def test_existing_keeps_parameters_and_a_reset_is_said(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    assert run("apply", "demo.yaml", "-P", "greeting=bye").exit_code == 0
    kept = run("apply", "demo.yaml", "--existing", "-f", "json")
    assert kept.exit_code == 0, kept.stderr
    assert outputs(as_json(kept))["said"] == "bye"
    assert "back to its default" not in kept.stderr

    reset = run("apply", "demo.yaml", "-f", "json")
    assert reset.exit_code == 0
    assert outputs(as_json(reset))["said"] == "hello"
    assert (
        "note: parameter greeting is back to its default 'hello' (it was 'bye'); "
        "`apply --existing` keeps stored values" in reset.stderr
    )


def test_destroy_lists_what_it_deletes_before_asking(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    assert run("apply", "demo.yaml").exit_code == 0
    declined = run("destroy", "demo", input="n\n")
    assert declined.exit_code == 1
    listing = declined.stdout.split("Delete stack demo")[0]
    assert "Stack demo (CREATE_COMPLETE) and its 3 resources:" in listing
    for name, kind in (("first", "TestResource"), ("second", "None"), ("secret", "RandomString")):
        assert re.search(rf"  {name}  OS::Heat::{kind}  \S+", listing)


FAILING = """\
heat_template_version: 2018-08-31
resources:
  fine:
    type: OS::Heat::None
  broken:
    type: OS::Heat::TestResource
    depends_on: fine
    properties:
      fail: true
"""


def test_a_failing_create_rolls_back_and_exits_non_zero(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "failing.yaml", FAILING)
    result = run("apply", "failing.yaml", "-f", "json")
    assert result.exit_code == 1
    assert as_json(result)["stack_status"] == "ROLLBACK_COMPLETE"
    assert "failed and was rolled back" in result.stderr
    assert "Test Resource failed broken" in result.stderr


def test_without_rollback_the_failure_stays(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "failing.yaml", FAILING)
    result = run("apply", "failing.yaml", "--no-rollback")
    assert result.exit_code == 1
    assert "CREATE_FAILED" in result.stdout  # the events and the final line
    assert "error: stack failing is CREATE_FAILED:" in result.stderr
    assert "Test Resource failed broken" in result.stderr
    resources = by_name(as_json(run("resources", "failing", "-f", "json")))
    assert resources["broken"]["resource_status"] == "CREATE_FAILED"
    assert resources["fine"]["resource_status"] == "CREATE_COMPLETE"


def test_a_bad_template_names_file_and_line_and_creates_nothing(run: Run, tmp_path: Path) -> None:
    write(
        tmp_path / "bad.yaml",
        "heat_template_version: 2018-08-31\n"
        "resources:\n"
        "  web:\n"
        "    type: OS::Heat::TestResource\n"
        "    properties:\n"
        "      valeu: x\n",
    )
    result = run("apply", "bad.yaml")
    assert result.exit_code == 1
    first = result.stderr.splitlines()[0]
    assert first.startswith("bad.yaml:6: resources.web.properties")
    assert "valeu" in first
    assert "nothing was changed" in result.stderr
    assert as_json(run("list", "-f", "json")) == []


def test_files_next_to_the_template_reach_get_file(run: Run, tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    write(tmp_path / "files" / "motd.txt", "welcome")
    write(
        tmp_path / "files.yaml",
        "heat_template_version: 2018-08-31\n"
        "resources:\n"
        "  r:\n    type: OS::Heat::TestResource\n"
        "    properties:\n      value: {get_file: files/motd.txt}\n"
        "outputs:\n  motd:\n    value: {get_attr: [r, output]}\n",
    )
    result = run("apply", "files.yaml", "-f", "json")
    assert result.exit_code == 0, result.stderr
    assert outputs(as_json(result)) == {"motd": "welcome"}


def test_destroy_asks_first_then_deletes_with_progress(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    assert run("apply", "demo.yaml").exit_code == 0

    declined = run("destroy", "demo", input="n\n")
    assert declined.exit_code == 1
    assert as_json(run("show", "demo", "-f", "json"))["stack_status"] == "CREATE_COMPLETE"

    destroyed = run("destroy", "demo", "--yes")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert "first  DELETE_COMPLETE" in destroyed.stdout
    assert "Stack demo DELETE_COMPLETE" in destroyed.stdout

    gone = run("show", "demo")
    assert gone.exit_code == 3
    assert gone.stderr.startswith("error: stack 'demo' not found")
    assert as_json(run("list", "-f", "json")) == []


def test_a_stack_applied_with_environment_parameters_can_be_destroyed(
    run: Run, tmp_path: Path
) -> None:
    # The delete converges to an empty template: the environment's parameter values for
    # the old template must not be checked against it (they were: "was not defined").
    write(tmp_path / "demo.yaml", TEMPLATE)
    write(tmp_path / "env.yaml", "parameters: {greeting: Carol}\nparameter_defaults: {x: 1}\n")
    applied = run("apply", "demo.yaml", "-e", "env.yaml", "-f", "json")
    assert applied.exit_code == 0, applied.stderr
    assert outputs(as_json(applied))["said"] == "Carol"

    destroyed = run("destroy", "demo", "-y")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert "Stack demo DELETE_COMPLETE" in destroyed.stdout


def test_merged_environments_with_merge_strategies_can_be_destroyed(
    run: Run, tmp_path: Path
) -> None:
    # Two files, one with parameter_merge_strategies: the environment is stored per file.
    write(tmp_path / "demo.yaml", TEMPLATE)
    write(
        tmp_path / "one.yaml",
        "parameters: {greeting: Carol}\nparameter_merge_strategies: {greeting: overwrite}\n",
    )
    write(tmp_path / "two.yaml", "parameters: {greeting: Dave}\n")
    applied = run("apply", "demo.yaml", "-e", "one.yaml", "-e", "two.yaml", "-f", "json")
    assert applied.exit_code == 0, applied.stderr
    assert outputs(as_json(applied))["said"] == "Dave"

    destroyed = run("destroy", "demo", "-y")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert as_json(run("list", "-f", "json")) == []


def test_usage_errors_and_missing_things(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "demo.yaml", TEMPLATE)
    malformed = run("apply", "demo.yaml", "-P", "greeting")
    assert malformed.exit_code == 2
    assert "expected KEY=VALUE, got 'greeting'" in malformed.stderr

    missing_state = run("show", "nothing")
    assert missing_state.exit_code == 3
    assert "no state file" in missing_state.stderr
    assert not (tmp_path / "state.db").exists()  # reading does not create the state file

    bad_name = run("apply", "demo.yaml", "--name", "9lives")
    assert bad_name.exit_code == 2
    assert "invalid stack name '9lives'" in bad_name.stderr

    assert run("apply", "demo.yaml").exit_code == 0
    not_paused = run("hook", "clear", "demo", "first", "pre-create")
    assert not_paused.exit_code == 4
    assert "is not paused at pre-create" in not_paused.stderr
    unknown_hook = run("hook", "clear", "demo", "first", "pre-lunch")
    assert unknown_hook.exit_code == 2
    assert "unknown hook 'pre-lunch'" in unknown_hook.stderr


SLOW = """\
heat_template_version: 2018-08-31
parameters:
  wait:
    type: number
    default: 60
resources:
  slow:
    type: OS::Heat::TestResource
    properties:
      wait_secs: {get_param: wait}
"""

# The commands in a real process, so that Ctrl-C is a real SIGINT.
_PROGRAM = (
    "import click\n"
    "from converge.cli.stack_commands import register\n"
    "group = click.Group('converge')\n"
    "register(group)\n"
    "group()\n"
)


def test_ctrl_c_stops_cleanly_and_the_next_apply_supersedes(run: Run, tmp_path: Path) -> None:
    write(tmp_path / "slow.yaml", SLOW)
    process = subprocess.Popen(
        [sys.executable, "-c", _PROGRAM, "apply", "slow.yaml"],
        cwd=tmp_path,
        env={
            **os.environ,
            "CONVERGE_STATE": str(tmp_path / "state.db"),
            "PYTHONUNBUFFERED": "1",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = ""
        deadline = time.monotonic() + 30
        while "slow  CREATE_IN_PROGRESS" not in line and time.monotonic() < deadline:
            line = process.stdout.readline()
        assert "slow  CREATE_IN_PROGRESS" in line
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130, stderr
    assert "the engine stopped cleanly with the create of stack slow unfinished" in stderr
    assert "Traceback" not in stderr
    assert as_json(run("show", "slow", "-f", "json"))["stack_status"] == "CREATE_IN_PROGRESS"

    again = run("apply", "slow.yaml", "-P", "wait=0", "-f", "json")
    assert again.exit_code == 0, again.stderr
    assert as_json(again)["stack_status"] == "UPDATE_COMPLETE"


def test_provider_template_next_to_the_template_is_a_nested_stack(run: Run, tmp_path: Path) -> None:
    write(
        tmp_path / "part.yaml",
        "heat_template_version: 2021-04-16\n"
        "parameters: {word: {type: string}}\n"
        "resources:\n  inner: {type: OS::Heat::TestResource, properties: {value: {get_param: word}}}\n"
        "outputs: {said: {value: {get_attr: [inner, output]}}}\n",
    )
    write(
        tmp_path / "whole.yaml",
        "heat_template_version: 2021-04-16\n"
        "resources:\n  part: {type: part.yaml, properties: {word: hi}}\n"
        "outputs: {said: {value: {get_attr: [part, said]}}}\n",
    )
    applied = run("apply", "whole.yaml", "-f", "json")
    assert applied.exit_code == 0, applied.stderr
    assert outputs(as_json(applied))["said"] == "hi"
    assert [s["stack_name"] for s in as_json(run("list", "-f", "json"))] == ["whole"]
    listed = as_json(run("list", "--nested", "-f", "json"))
    (nested,) = [s for s in listed if s["stack_name"] != "whole"]
    assert nested["parent"] == as_json(applied)["id"]
    shown = as_json(run("show", nested["stack_name"], "-f", "json"))
    assert shown["stack_status"] == "CREATE_COMPLETE"
    destroyed = run("destroy", "whole", "--yes")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert as_json(run("list", "--nested", "-f", "json")) == []
