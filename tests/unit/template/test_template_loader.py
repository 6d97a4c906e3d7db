"""Loading templates: YAML/JSON, lines, limits, hostile documents, top-level sections."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converge.core.schema import ResourceTypeSchema, StaticTypeSchemas
from converge.core.template import (
    Limits,
    StackIdentity,
    load_environment,
    load_template,
    prepare_stack,
)
from converge.core.template.loader import load_document
from converge.errors import TemplateError, TemplateErrors

BASIC = """\
heat_template_version: 2016-10-14
description: a test
resources:
  web:
    type: OS::Heat::None
    properties:
      image: cirros
      ports: [80, 443]
"""


def test_versions_stay_strings_and_lines_are_recorded() -> None:
    template = load_template(BASIC, "stack.yaml")
    assert template.data["heat_template_version"] == "2016-10-14"
    assert template.version.date == "2016-10-14"
    lines = template.source_map
    assert lines.line_of(("resources", "web", "properties", "image")) == 7
    assert lines.line_of(("resources", "web", "properties", "ports", 1)) == 8
    assert lines.line_of(("resources", "web", "type")) == 5
    # unknown paths fall back to their nearest known ancestor
    assert lines.line_of(("resources", "web", "properties", "nope")) == 6


def test_yaml_scalars_follow_safe_loader_rules() -> None:
    data, _ = load_document("a: yes\nb: ~\nc: 0x10\nd: 1.5\ne: '1'\nf: 2001-01-01 10:00:00\n", "t")
    assert data == {"a": True, "b": None, "c": 16, "d": 1.5, "e": "1", "f": "2001-01-01 10:00:00"}


def test_release_names_are_versions() -> None:
    template = load_template("heat_template_version: wallaby\n", "t.yaml")
    assert template.version.date == "2021-04-16"


def test_json_templates_load_and_report_lines_lazily() -> None:
    text = '{\n  "heat_template_version": "2015-10-15",\n  "resources": {\n    "a": {"type": 1}\n  }\n}'
    template = load_template(text, "t.json")
    assert template.source_map.line_of(("resources", "a", "type")) == 4


def test_json_syntax_errors_name_the_line() -> None:
    with pytest.raises(TemplateError) as info:
        load_template(
            '{\n  "heat_template_version": "2015-10-15",\n  "resources": {,}\n}', "t.json"
        )
    assert info.value.file == "t.json"
    assert info.value.line == 3
    assert "invalid JSON" in str(info.value)


@pytest.mark.parametrize(
    ("text", "filename"),
    [('{"r": {"a": 1,\n "b": 2,\n "a": 3}}', "t.json"), ("r:\n  a: 1\n  b: 2\n  a: 3\n", "t.yaml")],
)
def test_repeated_keys_are_kept_as_heat_does_with_a_warning(text: str, filename: str) -> None:
    # Heat's loader keeps the last one; converge used to refuse the document.
    warnings: list[TemplateError] = []
    data, _ = load_document(text, filename, warnings=warnings)
    assert data == {"r": {"a": 3, "b": 2}}
    last = 3 if filename == "t.json" else 4
    first = 1 if filename == "t.json" else 2
    assert [w.format() for w in warnings] == [
        f"{filename}:{last}: r.a: duplicate key 'a': this one (line {last}) is used and the "
        f"one on line {first} ignored, as Heat does"
    ]
    with pytest.raises(
        TemplateError, match=f"duplicate key 'a' \\(first on line {first}\\)"
    ) as info:
        load_document(text, filename, strict=True)
    assert info.value.line == last
    assert info.value.path == "r.a"


def test_repeated_keys_reach_the_notes_of_a_prepared_stack() -> None:
    text = "heat_template_version: 2021-04-16\nresources:\n  a: {type: Test::Value}\n  a: {type: OS::Heat::None}\n"
    template = load_template(text, "t.yaml")
    assert template.resources == {"a": {"type": "OS::Heat::None"}}
    schemas = StaticTypeSchemas([ResourceTypeSchema("OS::Heat::None", open_properties=True)])
    definition = prepare_stack(template, identity=StackIdentity("s", "id", "p"), schemas=schemas)
    assert definition.notes == (
        "t.yaml:4: resources.a: duplicate key 'a': this one (line 4) is used and the one on "
        "line 3 ignored, as Heat does",
    )
    with pytest.raises(TemplateError, match=r"t\.yaml:4: resources\.a: duplicate key 'a'"):
        load_template(text, "t.yaml", strict=True)
    environment = load_environment("parameters:\n  x: 1\n  x: 2\n", "env.yaml")
    assert environment.parameters == {"x": 2}
    assert environment.notes[0].startswith("env.yaml:3: parameters.x: duplicate key 'x'")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: [1,\n", 2, "invalid YAML"),
        ("a: &x [*x]\n", 1, "refers to a collection that contains it"),
        ("a: *nope\n", 1, "unknown alias *nope"),
        ("a: 1\n---\nb: 2\n", 2, "single YAML document"),
        ("a: !!python/object:os.system x\n", 1, "unsupported YAML tag"),
        ("? [a]\n: b\n", 1, "mapping key must be a string"),
        ("a: !!int x\n", 1, "is not a valid int"),
    ],
)
def test_yaml_problems_are_located(text: str, line: int, message: str) -> None:
    with pytest.raises(TemplateError) as info:
        load_document(text, "t.yaml")
    assert info.value.file == "t.yaml"
    assert info.value.line == line
    assert message in info.value.message


def test_merge_keys_work() -> None:
    data, _ = load_document("base: &b {type: X, x: 1}\nr: {<<: *b, x: 2}\n", "t")
    assert data["r"] == {"type": "X", "x": 2}


def test_billion_laughs_is_refused_quickly() -> None:
    names = "abcdefghij"
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{names[i + 1]}: &{names[i + 1]} [" + ", ".join([f"*{names[i]}"] * 10) + "]\n"
        for i in range(9)
    )
    start = time.perf_counter()
    with pytest.raises(TemplateError, match="too large"):
        load_document(text, "t.yaml")
    assert time.perf_counter() - start < 1


@pytest.mark.parametrize(
    "text", ["[" * 200_000, "- " * 200_000, "{a: " * 200_000, "[" * 200_000 + "]" * 200_000]
)
def test_deep_nesting_is_refused_without_crashing(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(TemplateError, match="deeper than the limit of 100"):
        load_document(text, "t.yaml")
    assert time.perf_counter() - start < 1


def test_deep_json_is_refused() -> None:
    with pytest.raises(TemplateError, match="deeper"):
        load_document('{"a": ' + "[" * 150 + "]" * 150 + "}", "t.json")


def test_size_limits() -> None:
    limits = Limits(max_template_bytes=100, max_resources=2)
    with pytest.raises(TemplateError, match="more than the limit of 100 bytes"):
        load_template("#" * 101, "t.yaml", limits=limits)
    with pytest.raises(TemplateError, match="more than the limit of 100 bytes"):
        load_template(("é" * 60).encode(), "t.yaml", limits=limits)
    text = "heat_template_version: 2016-10-14\nresources: {a: {}, b: {}, c: {}}\n"
    with pytest.raises(TemplateError, match="3 resources, more than the limit of 2"):
        load_template(text, "t.yaml", limits=limits)


def test_bytes_must_be_utf8() -> None:
    with pytest.raises(TemplateError, match="not UTF-8"):
        load_template(b"heat_template_version: \xff\n", "t.yaml")
    assert load_template("\ufeffheat_template_version: 2016-10-14\n".encode()).version


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n", "a template must be a mapping"),
        ("resources: {}\n", "missing heat_template_version"),
        ("heat_template_version: 2012-01-01\n", "unknown heat_template_version"),
        ("heat_template_version: 2016-10-14\nresource: {}\n", "did you mean 'resources'?"),
        ("heat_template_version: 2015-10-15\nconditions: {}\n", "need heat_template_version 2016"),
        ("heat_template_version: 2016-10-14\nresources: [a]\n", "resources must be a mapping"),
        ("heat_template_version: 2016-10-14\ndescription: [a]\n", "description must be a string"),
    ],
)
def test_top_level_problems(text: str, message: str) -> None:
    with pytest.raises(TemplateError) as info:
        load_template(text, "t.yaml")
    assert message in str(info.value)


# --- Any text either loads and validates, or raises TemplateError; never anything else. ---

SCHEMAS = StaticTypeSchemas([])
IDENTITY = StackIdentity("s", "id", "p")

yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=6),
    st.sampled_from(
        [
            "get_param",
            "get_attr",
            "get_resource",
            "OS::Heat::None",
            "2016-10-14",
            "if",
            "str_replace",
        ]
    ),
)
keys = st.sampled_from(
    [
        "heat_template_version",
        "resources",
        "parameters",
        "outputs",
        "conditions",
        "type",
        "properties",
        "value",
        "default",
        "condition",
        "depends_on",
        "get_param",
        "get_attr",
        "get_resource",
        "equals",
        "if",
        "a",
        "b",
        "description",
        "constraints",
        "range",
        "deletion_policy",
        "metadata",
        "list_join",
        "str_replace",
        "template",
        "params",
    ]
)
documents = st.recursive(
    yaml_scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(keys, children, max_size=5)
    ),
    max_leaves=30,
)


def _check(text: str | bytes) -> None:
    try:
        template = load_template(text, "fuzz.yaml", limits=Limits(max_template_bytes=20_000))
        prepare_stack(template, identity=IDENTITY, schemas=SCHEMAS)
    except TemplateError as exc:
        assert str(exc)
        if isinstance(exc, TemplateErrors):
            assert exc.errors


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents, st.sampled_from(["2016-10-14", "2013-05-23", "2021-04-16", "2015-10-15"]))
def test_any_document_loads_or_raises_template_error(body: object, version: str) -> None:
    import json

    if isinstance(body, dict):
        body = {"heat_template_version": version, **body}
    _check(json.dumps(body))
    import yaml

    _check(yaml.safe_dump(body))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!,\"' \n\t#|>%@`?.0")), max_size=80))
def test_any_text_loads_or_raises_template_error(text: str) -> None:
    _check(text)
    _check(text.encode("utf-8"))
