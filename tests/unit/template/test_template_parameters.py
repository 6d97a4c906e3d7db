"""Parameters: declarations, Heat's coercion, precedence, constraints, hidden and immutable."""

from __future__ import annotations

from typing import Any

import pytest

from converge.core.schema import StaticTypeSchemas
from converge.core.template import (
    StackDefinition,
    StackIdentity,
    load_environment,
    load_template,
    prepare_stack,
)
from converge.errors import TemplateError, TemplateErrors

HEAD = "heat_template_version: 2018-08-31\n"


def prepare(
    text: str,
    schemas: StaticTypeSchemas,
    identity: StackIdentity,
    env: str | None = None,
    **kwargs: Any,
) -> StackDefinition:
    environment = load_environment(env, "env.yaml") if env is not None else None
    return prepare_stack(
        load_template(HEAD + text, "t.yaml"),
        environment=environment,
        identity=identity,
        schemas=schemas,
        **kwargs,
    )


def messages(error: TemplateError) -> list[str]:
    errors = error.errors if isinstance(error, TemplateErrors) else [error]
    return [e.format() for e in errors]


TYPES = """\
parameters:
  s: {type: string, default: 5}
  n: {type: number, default: "2.5"}
  l: {type: comma_delimited_list, default: "a, b ,c"}
  j: {type: json, default: '{"k": [1]}'}
  b: {type: boolean, default: "yes"}
  e: {type: comma_delimited_list, default: ""}
"""


def test_types_are_coerced_like_heat(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    definition = prepare(TYPES, schemas, identity)
    assert dict(definition.parameters) == {
        "s": "5",
        "n": 2.5,
        "l": ["a", "b", "c"],
        "j": {"k": [1]},
        "b": True,
        "e": [],
    }


def test_given_values_are_coerced(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    definition = prepare(TYPES, schemas, identity, parameters={"n": "7", "l": "x", "b": "off"})
    assert definition.parameters["n"] == 7
    assert definition.parameters["l"] == ["x"]
    assert definition.parameters["b"] is False


PRECEDENCE = """\
parameters:
  a: {type: string, default: template}
  b: {type: string, default: template}
  c: {type: string, default: template}
  d: {type: string, default: template}
"""


def test_precedence(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    env = (
        "parameters: {a: env, b: env}\n"
        "parameter_defaults: {a: pd, b: pd, c: pd, not_in_template: ignored}\n"
    )
    definition = prepare(PRECEDENCE, schemas, identity, env=env, parameters={"a": "given"})
    assert dict(definition.parameters) == {"a": "given", "b": "env", "c": "pd", "d": "template"}


def test_unknown_given_and_env_parameters_are_errors(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    with pytest.raises(TemplateError) as info:
        prepare(PRECEDENCE, schemas, identity, env="parameters:\n  e: 1\n", parameters={"aa": 1})
    found = messages(info.value)
    assert "parameter 'aa' was not defined in the template (did you mean 'a'?)" in found
    assert "env.yaml:2: parameters.e: parameter 'e' was not defined in the template" in found


def test_required_parameter_without_value(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    with pytest.raises(TemplateError) as info:
        prepare("parameters:\n  image: {type: string}\n", schemas, identity)
    assert messages(info.value) == [
        "t.yaml:3: parameters.image: parameter 'image' needs a value: "
        "it has no default and none was given"
    ]


CONSTRAINED = """\
parameters:
  size:
    type: number
    constraints:
      - range: {min: 1, max: 10}
      - modulo: {step: 2, offset: 1}
  name:
    type: string
    constraints:
      - length: {min: 2}
        description: Name is too short
      - allowed_pattern: "[a-z]+"
  password:
    type: string
    hidden: true
    constraints:
      - allowed_pattern: "[a-z]+"
  flavor:
    type: string
    constraints:
      - custom_constraint: nova.flavor
"""


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"size": 11},
            "parameters.size: invalid value given for parameter 'size': "
            "11 is out of range (min: 1, max: 10)",
        ),
        ({"size": "4"}, "4 is not a multiple of 2 with an offset of 1"),
        ({"size": "x"}, "expected a number, got 'x'"),
        ({"name": "a"}, "Name is too short"),
        ({"name": "ab1"}, '"ab1" does not match pattern "[a-z]+"'),
    ],
)
def test_constraints(
    schemas: StaticTypeSchemas, identity: StackIdentity, given: dict[str, Any], expected: str
) -> None:
    values = {"size": 3, "name": "ab", "password": "abc", "flavor": "any", **given}
    with pytest.raises(TemplateError) as info:
        prepare(CONSTRAINED, schemas, identity, parameters=values)
    assert any(expected in message for message in messages(info.value))


def test_valid_constrained_values_and_unchecked_custom_constraint(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    values = {"size": "3", "name": "ab", "password": "abc", "flavor": "m1.anything"}
    definition = prepare(CONSTRAINED, schemas, identity, parameters=values)
    assert definition.parameters["size"] == 3
    assert definition.hidden_parameters == frozenset({"password"})


def test_hidden_values_never_appear_in_messages(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    values = {"size": 3, "name": "ab", "password": "S3CRET-x", "flavor": "f"}
    with pytest.raises(TemplateError) as info:
        prepare(CONSTRAINED, schemas, identity, parameters=values)
    assert "S3CRET" not in str(info.value)
    assert "does not match pattern" in str(info.value)
    text = "parameters:\n  p: {type: number, hidden: true}\n"
    with pytest.raises(TemplateError) as info:
        prepare(text, schemas, identity, parameters={"p": "S3CRET"})
    assert "S3CRET" not in str(info.value)


def test_immutable_parameters_cannot_change(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        "parameters:\n  a: {type: string, immutable: true}\n  b: {type: number, immutable: true}\n"
        "  c: {type: string}\n"
    )
    same = prepare(
        text,
        schemas,
        identity,
        parameters={"a": "x", "b": "1", "c": "new"},
        previous_parameters={"a": "x", "b": 1, "c": "old"},
    )
    assert same.parameters["c"] == "new"
    with pytest.raises(TemplateError) as info:
        prepare(
            text,
            schemas,
            identity,
            parameters={"a": "y", "b": 2, "c": "z"},
            previous_parameters={"a": "x", "b": 1, "c": "z"},
        )
    assert messages(info.value) == [
        "The following parameters are immutable and may not be updated: a, b"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "parameters:\n  p: {type: strng}\n",
            "unknown parameter type 'strng' (did you mean 'string'?)",
        ),
        ("parameters:\n  p: {default: 1}\n", "parameters.p: missing type"),
        (
            "parameters:\n  p: {type: string, defualt: 1}\n",
            "unknown key 'defualt' (did you mean 'default'?)",
        ),
        (
            "parameters:\n  p: {type: string, constraints: [{range: {min: 1}}]}\n",
            "range is not valid for a string parameter",
        ),
        (
            "parameters:\n  p: {type: number, default: 20, constraints: [{range: {max: 10}}]}\n",
            "parameters.p.default: invalid default: 20 is out of range",
        ),
        (
            "parameters:\n  p: {type: string, constraints: [{allowed_pattern: '('}]}\n",
            "not a valid regular expression",
        ),
        ("parameters:\n  OS::stack_name: {type: string}\n", "pseudo parameter"),
        (
            "parameter_groups:\n- parameters: [q]\nparameters:\n  p: {type: string, default: a}\n",
            "the grouped parameter 'q' does not reference a valid parameter",
        ),
        (
            "parameters:\n  p:\n    type: string\n    constraints:\n      - custom_constraint: ip_adr\n",
            "t.yaml:6: parameters.p.constraints[0].custom_constraint: unknown custom_constraint "
            "'ip_adr' (did you mean 'ip_addr'?)",
        ),
        (
            "parameters:\n  p:\n    type: string\n    constraints:\n      - custom_constraint: nova.flavour\n",
            "t.yaml:6: parameters.p.constraints[0].custom_constraint: unknown custom_constraint "
            "'nova.flavour' (did you mean 'nova.flavor'?)",
        ),
        (
            "parameters:\n  p: {type: string, constraints: [{custom_constraint: zzz}]}\n",
            "t.yaml:3: parameters.p.constraints[0].custom_constraint: unknown custom_constraint "
            "'zzz'; Heat's are cron_expression, dns_domain",
        ),
        (
            "parameters:\n  p: {type: json, constraints: [{custom_constraint: ip_addr}]}\n",
            "t.yaml:3: parameters.p.constraints[0].custom_constraint: custom_constraint is not "
            "valid for a json parameter",
        ),
        (
            "parameters:\n  p:\n    type: string\n    default: nope\n"
            "    constraints: [{custom_constraint: mac_addr}]\n",
            "t.yaml:5: parameters.p.default: invalid default: Error validating value 'nope': "
            "Invalid MAC address.",
        ),
    ],
)
def test_declaration_problems(
    schemas: StaticTypeSchemas, identity: StackIdentity, text: str, expected: str
) -> None:
    with pytest.raises(TemplateError) as info:
        prepare(text, schemas, identity)
    assert any(expected in message for message in messages(info.value)), messages(info.value)


def test_modulo_and_tags_need_recent_versions(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        "heat_template_version: 2016-10-14\nparameters:\n  p:\n    type: number\n    default: 1\n"
        "    tags: [a]\n    constraints: [{modulo: {step: 2, offset: 1}}]\n"
    )
    with pytest.raises(TemplateError) as info:
        prepare_stack(load_template(text, "t.yaml"), identity=identity, schemas=schemas)
    found = " ".join(messages(info.value))
    assert "unknown key 'tags'" in found
    assert "unknown constraint 'modulo'" in found


def test_pseudo_parameters(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    text = (
        "resources:\n  v:\n    type: Test::Value\n    properties:\n      value:\n"
        "        - {get_param: OS::stack_name}\n        - {get_param: OS::stack_id}\n"
        "        - {get_param: OS::project_id}\n"
    )
    definition = prepare(text, schemas, identity)
    assert definition.resources["v"].properties == {"value": ["mystack", "stack-id-1", "project-1"]}


@pytest.mark.parametrize("depth", [101, 100_000])
def test_deeply_nested_json_text_is_a_clear_error(
    schemas: StaticTypeSchemas, identity: StackIdentity, depth: int
) -> None:
    # 100,000 deep was a RecursionError from json.loads, not a template error.
    text = "[" * depth + "]" * depth
    with pytest.raises(TemplateError) as info:
        prepare(f"parameters:\n  j: {{type: json, default: '{text}'}}\n", schemas, identity)
    assert messages(info.value) == [
        "t.yaml:3: parameters.j.default: invalid default: not valid JSON: "
        "nesting is deeper than 100 levels"
    ]
    with pytest.raises(TemplateError, match="nesting is deeper than 100 levels"):
        prepare("parameters:\n  j: {type: json}\n", schemas, identity, parameters={"j": text})
    assert prepare(
        "parameters:\n  j: {type: json}\n",
        schemas,
        identity,
        parameters={"j": "[" * 100 + "]" * 100},
    ).parameters["j"]


def test_values_are_optional_when_validating_as_heat_does(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        "parameters:\n  image: {type: string}\n  size: {type: number, default: 1}\n"
        "conditions:\n  cirros: {equals: [{get_param: image}, cirros]}\n"
        "resources:\n  s:\n    type: Test::Server\n"
        "    properties: {image: {get_param: image}, flavor: {if: [cirros, small, huge]}}\n"
    )
    definition = prepare(text, schemas, identity, require_values=False)
    assert definition.parameters == {"size": 1}
    assert definition.notes == ("parameter 'image' has no value: plan and apply will need one",)
    # everything else is still checked, including a wrong value that is given
    with pytest.raises(TemplateError) as info:
        prepare(text.replace("flavor:", "flavr:"), schemas, identity, require_values=False)
    assert messages(info.value) == [
        "t.yaml:10: resources.s.properties.flavr: unknown property 'flavr' (did you mean 'flavor'?)"
    ]
    with pytest.raises(TemplateError, match="invalid value given for parameter 'size'"):
        prepare(text, schemas, identity, parameters={"size": "x"}, require_values=False)
    with pytest.raises(TemplateError, match="parameter 'image' needs a value"):
        prepare(text, schemas, identity)


def test_an_invalid_default_is_an_error_only_where_it_is_used(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    # Heat checks the given value, or the default when none is given (never both).
    text = (
        "parameters:\n  name:\n    type: string\n    default: Bad_Name\n"
        "    constraints: [{allowed_pattern: '[a-z]+'}]\n"
    )
    with pytest.raises(TemplateError) as info:
        prepare(text, schemas, identity)
    assert messages(info.value) == [
        't.yaml:5: parameters.name.default: invalid default: "Bad_Name" does not match '
        'pattern "[a-z]+"'
    ]
    with pytest.raises(TemplateError, match="invalid default"):
        prepare(text, schemas, identity, require_values=False)  # create would use it
    definition = prepare(text, schemas, identity, parameters={"name": "good"})
    assert definition.parameters == {"name": "good"}
    assert definition.notes == (
        't.yaml:5: parameters.name.default: invalid default: "Bad_Name" does not match '
        'pattern "[a-z]+" (unused here)',
    )
