"""Reading apply/plan inputs: -P parsing and the files map built from get_file and providers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge.cli.inputs import parse_parameters, read_inputs
from converge.errors import TemplateError, TemplateErrors


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# --- -P key=value ---------------------------------------------------------------------------


def test_value_may_contain_equals_and_last_key_wins() -> None:
    assert parse_parameters(["a=1", "b=x=y", "a=2", "c="]) == {"a": "2", "b": "x=y", "c": ""}


@pytest.mark.parametrize("bad", ["novalue", "=value", ""])
def test_malformed_parameter_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match=r"expected KEY=VALUE, got"):
        parse_parameters([bad])


keys = st.text(st.characters(codec="utf-8", exclude_characters="="), min_size=1)


@given(st.lists(st.tuples(keys, st.text()), max_size=8))
def test_parse_round_trips(pairs: list[tuple[str, str]]) -> None:
    expected: dict[str, str] = {}
    for key, value in pairs:
        expected[key] = value
    assert parse_parameters([f"{k}={v}" for k, v in pairs]) == expected


# --- the files map --------------------------------------------------------------------------


def test_get_file_and_provider_templates_are_read_relative_to_their_file(tmp_path: Path) -> None:
    write(tmp_path / "scripts" / "boot.sh", "#!/bin/sh\necho hi\n")
    write(tmp_path / "nested" / "inner.txt", "inner")
    write(
        tmp_path / "nested" / "server.yaml",
        "heat_template_version: 2018-08-31\n"
        "resources:\n  r:\n    type: OS::Heat::TestResource\n"
        "    properties:\n      value: {get_file: inner.txt}\n",
    )
    template = write(
        tmp_path / "stack.yaml",
        "heat_template_version: 2018-08-31\n"
        "resources:\n"
        "  a:\n    type: OS::Heat::TestResource\n"
        "    properties:\n      value: {get_file: scripts/boot.sh}\n"
        "  b:\n    type: nested/server.yaml\n",
    )
    inputs = read_inputs(template)
    assert inputs.files == {
        "scripts/boot.sh": "#!/bin/sh\necho hi\n",
        "nested/server.yaml": (tmp_path / "nested" / "server.yaml").read_text(),
        "inner.txt": "inner",
    }
    assert inputs.template.filename == str(template)


def test_environment_providers_are_read_relative_to_the_environment(tmp_path: Path) -> None:
    write(tmp_path / "env" / "thing.yaml", "heat_template_version: 2018-08-31\n")
    template = write(tmp_path / "stack.yaml", "heat_template_version: 2018-08-31\n")
    environment = write(
        tmp_path / "env" / "env.yaml",
        "resource_registry:\n  My::Thing: thing.yaml\n  My::Alias: OS::Heat::None\n"
        "  resources:\n    web:\n      hooks: pre-create\n",
    )
    inputs = read_inputs(template, [environment], ["x=1"])
    assert inputs.files == {"thing.yaml": "heat_template_version: 2018-08-31\n"}
    assert inputs.parameters == {"x": "1"}
    assert [e.filename for e in inputs.environments] == [str(environment)]


def test_files_outside_the_template_directory_are_read_as_heatclient_does(tmp_path: Path) -> None:
    # TripleO's service templates name ../common/… and ../../network/…: heatclient reads them
    write(tmp_path / "common" / "ports.yaml", "heat_template_version: 2018-08-31\n")
    write(tmp_path / "common" / "script.sh", "echo hi\n")
    write(tmp_path / "absolute.txt", "absolute")
    template = write(
        tmp_path / "deployment" / "service.yaml",
        "heat_template_version: 2018-08-31\n"
        "resources:\n"
        "  ports:\n    type: ../common/ports.yaml\n"
        "  a:\n    type: OS::Heat::TestResource\n"
        "    properties:\n"
        "      value: {get_file: ../common/script.sh}\n"
        f"      wait_secs: {{get_file: 'file://{tmp_path}/absolute.txt'}}\n",
    )
    assert read_inputs(template).files == {
        "../common/ports.yaml": "heat_template_version: 2018-08-31\n",
        "../common/script.sh": "echo hi\n",
        f"file://{tmp_path}/absolute.txt": "absolute",
    }


def test_missing_files_and_remote_urls_are_refused_with_the_line(tmp_path: Path) -> None:
    template = write(
        tmp_path / "proj" / "stack.yaml",
        "heat_template_version: 2018-08-31\n"
        "resources:\n"
        "  a:\n    type: OS::Heat::TestResource\n"
        "    properties:\n      value: {get_file: 'https://example.com/x'}\n"
        "  b:\n    type: OS::Heat::TestResource\n"
        "    properties:\n      value: {get_file: ../missing.txt}\n",
    )
    with pytest.raises(TemplateErrors) as raised:
        read_inputs(template)
    lines = raised.value.format().splitlines()
    assert lines[0].startswith(f"{template}:6: resources.a.properties.value.get_file: ")
    assert "'https://example.com/x' is not a local file" in lines[0]
    assert lines[1].startswith(f"{template}:10: resources.b.properties.value.get_file: ")
    assert "no file '../missing.txt'" in lines[1]


def test_a_missing_template_is_a_template_error(tmp_path: Path) -> None:
    with pytest.raises(TemplateError, match=r"nope\.yaml: no such file"):
        read_inputs(tmp_path / "nope.yaml")


def test_one_key_naming_two_files_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "a.txt", "top")
    write(tmp_path / "sub" / "a.txt", "sub")
    write(
        tmp_path / "sub" / "p.yaml",
        "heat_template_version: 2018-08-31\noutputs:\n  o:\n    value: {get_file: a.txt}\n",
    )
    template = write(
        tmp_path / "stack.yaml",
        "heat_template_version: 2018-08-31\n"
        "resources:\n  p:\n    type: sub/p.yaml\n"
        "outputs:\n  o:\n    value: {get_file: a.txt}\n",
    )
    with pytest.raises(TemplateError, match="names two different files"):
        read_inputs(template)


def test_provider_cycles_terminate(tmp_path: Path) -> None:
    write(
        tmp_path / "a.yaml", "heat_template_version: 2018-08-31\nresources:\n  b: {type: b.yaml}\n"
    )
    write(
        tmp_path / "b.yaml", "heat_template_version: 2018-08-31\nresources:\n  a: {type: a.yaml}\n"
    )
    inputs = read_inputs(tmp_path / "a.yaml")
    assert set(inputs.files) == {"a.yaml", "b.yaml"}
