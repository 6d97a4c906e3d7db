"""``converge validate`` on files: problems with file:line, summaries, JSON, the files map."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from converge.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, [str(arg) for arg in args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


@pytest.mark.parametrize(
    "args",
    [
        ("hello.yaml",),
        ("pipeline.yaml",),
        ("conditions.yaml",),
        ("conditions.yaml", "-e", "conditions-prod.env.yaml"),
        ("provider/stack.yaml", "-e", "provider/env.yaml"),
    ],
)
def test_examples_are_valid(args: tuple[str, ...]) -> None:
    paths = [str(EXAMPLES / arg) if arg.endswith(".yaml") else arg for arg in args]
    code, output = run("validate", *paths)
    assert code == 0, output
    assert "valid (heat_template_version" in output


def test_summary_and_json(tmp_path: Path) -> None:
    code, output = run(
        "validate",
        EXAMPLES / "conditions.yaml",
        "-e",
        EXAMPLES / "conditions-prod.env.yaml",
        "-P",
        "replicas=2",
        "-f",
        "json",
    )
    assert code == 0
    report = json.loads(output)
    assert report["valid"] is True and report["errors"] == []
    assert report["parameters"] == {"environment": "prod", "replicas": 2}
    assert report["resources"]["balancer"] == "OS::Heat::Value"
    assert "debug_helper" not in report["resources"]
    assert report["resource_types"]["OS::Heat::Value"] == 2


def test_problems_are_printed_one_per_line(tmp_path: Path) -> None:
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        "heat_template_version: 2021-04-16\n"
        "resources:\n"
        "  web:\n"
        "    type: OS::Heat::TestResource\n"
        "    properties:\n"
        "      valeu: x\n"
        "  b:\n"
        "    type: OS::Heat::Nonee\n"
    )
    code, output = run("validate", stack)
    assert code == 1
    assert output.splitlines() == [
        f"{stack}:6: resources.web.properties.valeu: unknown property 'valeu' (did you mean 'value'?)",
        f"{stack}:8: resources.b.type: unknown resource type 'OS::Heat::Nonee' (did you mean 'OS::Heat::None'?)",
    ]
    code, output = run("validate", stack, "-f", "json")
    report = json.loads(output)
    assert code == 1 and report["valid"] is False
    assert report["errors"][0] == {
        "file": str(stack),
        "line": 6,
        "path": "resources.web.properties.valeu",
        "message": "unknown property 'valeu' (did you mean 'value'?)",
    }


def test_parameters_and_hidden_values(tmp_path: Path) -> None:
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        "heat_template_version: 2021-04-16\n"
        "parameters:\n  secret: {type: string, hidden: true}\n  n: {type: number}\n"
        "resources: {}\n"
    )
    code, output = run("validate", stack, "-P", "secret=hunter2", "-P", "n=4")
    assert code == 0
    assert "hunter2" not in output and "******" in output
    # As Heat's validate: no value is needed; plan (and apply) still demand one
    code, output = run("validate", stack, "-P", "secret=hunter2")
    assert code == 0, output
    assert "note: parameter 'n' has no value: plan and apply will need one" in output
    plan = CliRunner().invoke(
        main, ["plan", str(stack), "-P", "secret=x", "--state", str(tmp_path / "s.db")]
    )
    assert plan.exit_code == 1 and "parameter 'n' needs a value" in plan.output + plan.stderr
    code, output = run("validate", stack, "-P", "nokey")
    assert code == 2 and "expected KEY=VALUE" in output
    code, output = run("validate", stack, "-P", "secret=x", "-P", "n=1", "-P", "nn=2")
    assert (
        code == 1 and "parameter 'nn' was not defined in the template (did you mean 'n'?)" in output
    )


def test_files_map_from_the_template_directory(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "boot.sh").write_text("echo boot\n")
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        "heat_template_version: 2021-04-16\n"
        "resources:\n  v:\n    type: OS::Heat::Value\n"
        "    properties: {value: {get_file: scripts/boot.sh}}\n"
    )
    code, output = run("validate", stack)
    assert code == 0, output

    # The client side reads what the template names wherever it is, as heatclient does
    # (TripleO's templates name ../common/…); only the request's files map reaches a server.
    outside = tmp_path.parent / f"{tmp_path.name}-shared.sh"
    outside.write_text("echo shared\n")
    stack.write_text(stack.read_text().replace("scripts/boot.sh", f"../{outside.name}"))
    code, output = run("validate", stack)
    assert code == 0, output
    stack.write_text(stack.read_text().replace(f"../{outside.name}", "https://example.com/x"))
    code, output = run("validate", stack)
    assert code == 1 and "'https://example.com/x' is not a local file" in output


def test_environment_problems_are_located(tmp_path: Path) -> None:
    env = tmp_path / "env.yaml"
    env.write_text("parameters: {}\nresource_registy: {}\n")
    code, output = run("validate", EXAMPLES / "hello.yaml", "-e", env)
    assert code == 1
    assert output.strip() == (
        f"{env}:2: resource_registy: unknown section 'resource_registy' "
        "(did you mean 'resource_registry'?)"
    )


def test_version_option() -> None:
    code, output = run("--version")
    assert code == 0 and "converge" in output and "0.1.0" in output


def test_several_templates_in_one_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("heat_template_version: 2021-04-16\nresources:\n  a: {type: Nope}\n")
    code, output = run("validate", EXAMPLES / "hello.yaml", bad, EXAMPLES / "pipeline.yaml")
    assert code == 1
    assert f"{EXAMPLES / 'hello.yaml'}: valid" in output
    assert f"{EXAMPLES / 'pipeline.yaml'}: valid" in output
    assert f"{bad}:3: resources.a.type: unknown resource type 'Nope'" in output
    code, output = run("validate", EXAMPLES / "hello.yaml", bad, "-f", "json")
    reports = json.loads(output)
    assert [(r["template"], r["valid"]) for r in reports] == [
        (str(EXAMPLES / "hello.yaml"), True),
        (str(bad), False),
    ]
    code, output = run("validate", EXAMPLES / "hello.yaml", EXAMPLES / "pipeline.yaml")
    assert code == 0, output


def test_repeated_keys_are_notes_unless_strict(tmp_path: Path) -> None:
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        "heat_template_version: 2021-04-16\n"
        "resources:\n  a: {type: Nope}\n  a: {type: OS::Heat::None}\n"
    )
    code, output = run("validate", stack)
    assert code == 0, output
    assert (
        f"note: {stack}:4: resources.a: duplicate key 'a': this one (line 4) is used and "
        "the one on line 3 ignored, as Heat does"
    ) in output
    code, output = run("validate", stack, "--strict")
    assert code == 1
    assert output.strip() == f"{stack}:4: resources.a: duplicate key 'a' (first on line 3)"


def test_if_on_a_condition_of_a_parameter_without_value(tmp_path: Path) -> None:
    # The shape of TripleO's network/ports/vip.yaml: was a raw "Unresolved" traceback.
    stack = tmp_path / "vip.yaml"
    stack.write_text(
        "heat_template_version: 2018-08-31\n"
        "parameters:\n  FixedIPs: {type: json}\n  PortName: {type: string}\n"
        "conditions:\n  fixed_ip_not_set: {equals: [{get_param: FixedIPs}, []]}\n"
        "resources:\n  VipPort:\n    type: OS::Heat::Value\n"
        "    properties:\n      value: {if: [fixed_ip_not_set, {get_param: PortName}, x]}\n"
        "outputs:\n  ip_address:\n    value: {if: [fixed_ip_not_set, a, {get_param: FixedIPs}]}\n"
    )
    code, output = run("validate", stack)
    assert code == 0, output
    assert "note: parameter 'FixedIPs' has no value" in output
    for command in ("plan", "apply"):
        result = CliRunner().invoke(main, [command, str(stack), "--state", str(tmp_path / "s.db")])
        assert result.exit_code == 1, (command, result.output)
        assert "parameter 'FixedIPs' needs a value" in result.output + result.stderr


def test_a_nested_default_failing_its_pattern_is_an_error_only_when_used(tmp_path: Path) -> None:
    (tmp_path / "box.yaml").write_text(
        "heat_template_version: 2021-04-16\n"
        "parameters:\n  label:\n    type: string\n    default: Bad_Label\n"
        "    constraints: [{allowed_pattern: '[a-z]+'}]\n"
        "resources: {}\n"
    )
    stack = tmp_path / "stack.yaml"
    stack.write_text(
        "heat_template_version: 2021-04-16\n"
        "resources:\n  given: {type: box.yaml, properties: {label: fine}}\n"
    )
    code, output = run("validate", stack)
    assert code == 0, output
    stack.write_text(stack.read_text() + "  defaulted: {type: box.yaml}\n")
    code, output = run("validate", stack)
    assert code == 1
    assert 'box.yaml:5: parameters.label.default: invalid default: "Bad_Label"' in output


def test_local_paths_outside_the_allowed_roots_are_reported(tmp_path: Path) -> None:
    template = tmp_path / "stack.yaml"
    template.write_text(
        "heat_template_version: 2021-04-16\n"
        "resources:\n"
        "  inside:\n"
        "    type: Local::File\n"
        "    properties: {path: app/ok.conf}\n"
        "  escape:\n"
        "    type: Local::File\n"
        "    properties:\n"
        "      path: ../../etc/converge-escape\n"
        "  dir:\n"
        "    type: Local::Directory\n"
        "    properties: {path: /etc/converge-dir}\n"
    )
    state = tmp_path / "state" / "converge.db"
    code, output = run("validate", template, "--state", state)
    assert code == 1
    lines = output.splitlines()
    assert len(lines) == 2, output
    assert lines[0].startswith(f"{template}:9: resources.escape.properties.path: ")
    assert "outside the allowed roots" in lines[0] and str(tmp_path / "state") in lines[0]
    assert lines[1].startswith(f"{template}:12: resources.dir.properties.path: ")
    # The same template is valid where apply would allow those paths.
    (tmp_path / "app").mkdir()
    valid = template.read_text().replace("../../etc/converge-escape", "x.conf")
    template.write_text(valid.replace("/etc/converge-dir", str(tmp_path / "d")))
    code, output = run("validate", template, "--state", tmp_path / "converge.db")
    assert code == 0, output


def test_a_postgres_template_without_the_postgres_extra_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if psycopg were not installed (None in sys.modules makes its import fail).
    monkeypatch.setitem(sys.modules, "psycopg", None)
    code, text = run("validate", EXAMPLES / "postgres-app.yaml")
    assert code != 0
    assert "Traceback" not in text and "plugin bug" not in text
    assert re.search(
        r"postgres-app\.yaml:\d+: resources\.\w+\.type: PostgreSQL::(Role|Database) needs the "
        r"Python package 'psycopg', which is not installed: pip install 'converge\[postgres\]'",
        text,
    ), text
    # apply refuses the same way, before anything is made.
    monkeypatch.chdir(tmp_path)
    code, text = run("apply", EXAMPLES / "postgres-app.yaml", "--state", tmp_path / "s.db")
    assert code != 0 and "pip install 'converge[postgres]'" in text, text
    assert not (tmp_path / "postgres-app").exists()
