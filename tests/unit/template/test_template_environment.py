"""Environments: sections, registry mappings, wildcards, providers, hooks, merging."""

from __future__ import annotations

import pytest

from converge.core.schema import StaticTypeSchemas
from converge.core.template import (
    StackIdentity,
    load_environment,
    load_template,
    merge_environments,
    prepare_stack,
)
from converge.errors import TemplateError

REGISTRY = """\
resource_registry:
  My::Type: OS::Heat::None
  Alias::Server: Test::Server
  Chain::A: My::Type
  OS::Nova::*: Test::*
  My::Server: server.yaml
  resources:
    web*:
      hooks: [pre-create, post-update]
      restricted_actions: replace
    web_special:
      hooks: pre-delete
      Test::Server: OS::Heat::None
event_sinks:
  - type: zaqar-queue
    target: q
"""


def test_registry_mappings() -> None:
    env = load_environment(REGISTRY, "env.yaml")
    assert env.implementation_type("My::Type") == "OS::Heat::None"
    assert env.implementation_type("Chain::A") == "OS::Heat::None"
    assert env.implementation_type("OS::Nova::Server") == "Test::Server"
    assert env.implementation_type("My::Server") == "server.yaml"
    assert env.implementation_type("Test::Server", "web_special") == "OS::Heat::None"
    assert env.implementation_type("Test::Server", "web") == "Test::Server"
    assert env.implementation_type("Unmapped") == "Unmapped"
    assert env.provider_templates() == {"server.yaml"}


def test_hooks_and_restricted_actions_match_wildcard_names() -> None:
    env = load_environment(REGISTRY, "env.yaml")
    assert env.hooks_for("web1") == {"pre-create", "post-update"}
    assert env.hooks_for("web_special") == {"pre-create", "post-update", "pre-delete"}
    assert env.restricted_actions_for("web2") == {"replace"}
    assert env.hooks_for("db") == frozenset()
    assert env.notes and "event_sinks" in env.notes[0]


def test_mapping_loops_are_reported() -> None:
    env = load_environment("resource_registry:\n  A: B\n  B: A\n", "env.yaml")
    with pytest.raises(ValueError, match="loop: A -> B -> A"):
        env.implementation_type("A")


def test_a_wildcard_may_map_to_one_type_and_comes_before_exact_names_as_in_heat() -> None:
    # Heat documents "OS::*": OS::Heat::None; converge used to refuse it.
    env = load_environment(
        "resource_registry:\n"
        "  OS::*: OS::Heat::None\n"
        "  OS::Nova::*: Test::*\n"
        "  OS::Nova::Server: Test::Server\n"
        "  My::Thing: Test::Value\n",
        "env.yaml",
    )
    # Heat orders matching entries by their names: "OS::*" < "OS::Nova::*" < "OS::Nova::Server"
    assert env.implementation_type("OS::Nova::Server") == "OS::Heat::None"
    assert env.implementation_type("OS::Neutron::Port") == "OS::Heat::None"
    assert env.implementation_type("OS::Heat::None") == "OS::Heat::None"  # not a loop
    assert env.implementation_type("My::Thing") == "Test::Value"
    assert env.implementation_type("Other::Type") == "Other::Type"
    narrow = load_environment(
        "resource_registry:\n  OS::Nova::*: Test::*\n  OS::Nova::Server: OS::Heat::None\n",
        "env.yaml",
    )
    assert narrow.implementation_type("OS::Nova::Server") == "Test::Server"  # "*" < "S"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("parameter: {}\n", "env.yaml:1: parameter: unknown section 'parameter' (did you mean"),
        (
            "resource_registry:\n  resources:\n    r: {hooks: pre-craete}\n",
            "invalid hook type 'pre-craete' (did you mean 'pre-create'?)",
        ),
        (
            "resource_registry:\n  resources:\n    r: {restricted_actions: [delete]}\n",
            "invalid restricted action 'delete'",
        ),
        ("resource_registry: [a]\n", "resource_registry must be a map"),
        ("parameters: [a]\n", "parameters must be a map"),
        ("- a\n", "an environment must be a map"),
    ],
)
def test_environment_problems(text: str, message: str) -> None:
    with pytest.raises(TemplateError) as info:
        load_environment(text, "env.yaml")
    assert message in str(info.value)


def test_empty_environment() -> None:
    env = load_environment("", "env.yaml")
    assert env.parameters == {} and env.types == {}


def test_merge_later_wins_and_null_removes() -> None:
    first = load_environment(
        "parameters: {a: 1, b: 1}\nparameter_defaults: {x: 1}\n"
        "resource_registry:\n  My::T: OS::Heat::None\n  Other: Test::Value\n"
        "  resources:\n    r: {hooks: pre-create, restricted_actions: update}\n",
        "one.yaml",
    )
    second = load_environment(
        "parameters: {b: 2}\nparameter_defaults: {x: 2}\n"
        "resource_registry:\n  My::T: Test::Value\n  Other: null\n"
        "  resources:\n    r: {hooks: [pre-delete]}\n",
        "two.yaml",
    )
    merged = merge_environments([first, second])
    assert dict(merged.parameters) == {"a": 1, "b": 2}
    assert dict(merged.parameter_defaults) == {"x": 2}
    assert merged.implementation_type("My::T") == "Test::Value"
    assert merged.implementation_type("Other") == "Other"
    assert merged.hooks_for("r") == {"pre-delete"}
    assert merged.restricted_actions_for("r") == {"update"}
    assert merged.origins["a"].file == "one.yaml"
    assert merged.origins["b"].file == "two.yaml"


SERVER_TEMPLATE = """\
heat_template_version: 2016-10-14
parameters:
  image: {type: string}
  size: {type: number, default: 1}
resources:
  inner: {type: OS::Heat::None}
outputs:
  address: {value: 10.0.0.1}
"""


def test_provider_templates_validate_properties_and_attributes(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    env = load_environment(REGISTRY, "env.yaml")
    good = (
        "heat_template_version: 2016-10-14\nresources:\n  s:\n    type: My::Server\n"
        "    properties: {image: cirros}\n  v:\n    type: Test::Value\n"
        "    properties: {value: {get_attr: [s, address]}}\n"
    )
    definition = prepare_stack(
        load_template(good, "t.yaml"),
        environment=env,
        files={"server.yaml": SERVER_TEMPLATE},
        identity=identity,
        schemas=schemas,
    )
    server = definition.resources["s"]
    assert server.implementation_type == "server.yaml"
    assert server.provider_template == "server.yaml"
    assert definition.resources["v"].requires == {"s"}

    bad = good.replace("{image: cirros}", "{imag: cirros}").replace("address]", "adress]")
    with pytest.raises(TemplateError) as info:
        prepare_stack(
            load_template(bad, "t.yaml"),
            environment=env,
            files={"server.yaml": SERVER_TEMPLATE},
            identity=identity,
            schemas=schemas,
        )
    text = str(info.value)
    assert (
        "t.yaml:5: resources.s.properties.imag: unknown property 'imag' (did you mean 'image'?)"
        in text
    )
    assert "missing required property 'image'" in text
    # Heat accepts any attribute of a template resource (null when there is no such
    # output): a warning that still names the likely output.
    assert "adress" not in text
    warned = prepare_stack(
        load_template(good.replace("address]", "adress]"), "t.yaml"),
        environment=env,
        files={"server.yaml": SERVER_TEMPLATE},
        identity=identity,
        schemas=schemas,
    )
    assert any(
        "has no attribute 'adress' (did you mean 'address'?); its value will be null" in note
        for note in warned.notes
    )


def test_missing_provider_template_file(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    env = load_environment(REGISTRY, "env.yaml")
    text = "heat_template_version: 2016-10-14\nresources:\n  s: {type: My::Server}\n"
    with pytest.raises(
        TemplateError, match=r"provider template 'server\.yaml' is not in the files"
    ):
        prepare_stack(
            load_template(text, "t.yaml"), environment=env, identity=identity, schemas=schemas
        )


def test_environment_hooks_reach_definitions(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    env = load_environment(REGISTRY, "env.yaml")
    text = "heat_template_version: 2016-10-14\nresources:\n  web1: {type: My::Type}\n"
    definition = prepare_stack(
        load_template(text, "t.yaml"), environment=env, identity=identity, schemas=schemas
    )
    web = definition.resources["web1"]
    assert web.type == "My::Type" and web.implementation_type == "OS::Heat::None"
    assert web.hooks == {"pre-create", "post-update"}
    assert web.restricted_actions == {"replace"}


def test_data_round_trip(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    import json

    from converge.core.template import environment_from_data, template_from_data

    env = load_environment(REGISTRY + "parameter_defaults: {p: 1}\n", "env.yaml")
    again = environment_from_data(json.loads(json.dumps(env.to_data())))
    assert again.implementation_type("Chain::A") == "OS::Heat::None"
    assert again.implementation_type("Test::Server", "web_special") == "OS::Heat::None"
    assert again.hooks_for("web_special") == env.hooks_for("web_special")
    assert again.restricted_actions_for("web1") == {"replace"}
    assert dict(again.parameter_defaults) == {"p": 1}
    with pytest.raises(TemplateError, match="unknown section 'bogus'"):
        environment_from_data({"bogus": 1})

    template = template_from_data(
        {"heat_template_version": "2016-10-14", "resources": {"n": {"type": "My::Type"}}}
    )
    definition = prepare_stack(template, environment=again, identity=identity, schemas=schemas)
    assert definition.resources["n"].implementation_type == "OS::Heat::None"
    with pytest.raises(TemplateError, match="missing heat_template_version"):
        template_from_data({})
