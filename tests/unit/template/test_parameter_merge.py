"""parameter_merge_strategies: Heat's overwrite / merge / deep_merge across environment files."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from converge.core.schema import StaticTypeSchemas
from converge.core.template import (
    StackDefinition,
    StackIdentity,
    environment_from_data,
    load_environment,
    load_template,
    merge_environments,
    prepare_stack,
)
from converge.core.template.environment import Environment
from converge.core.template.nested import child_environment
from converge.core.template.parameter_merge import merge_values
from converge.core.template.parameters import ParameterType
from converge.errors import TemplateError, TemplateErrors

TEMPLATE = """\
heat_template_version: 2018-08-31
parameters:
  name: {type: string, default: ''}
  hosts: {type: comma_delimited_list, default: ''}
  config: {type: json, default: {}}
  count: {type: number, default: 0}
  debug: {type: boolean, default: false}
"""


def environment(*texts: str) -> Environment:
    return merge_environments(
        load_environment(text, f"env{index}.yaml") for index, text in enumerate(texts, 1)
    )


def prepare(
    env: Environment,
    schemas: StaticTypeSchemas,
    identity: StackIdentity,
    template: str = TEMPLATE,
    **kwargs: Any,
) -> StackDefinition:
    return prepare_stack(
        load_template(template, "t.yaml"),
        environment=env,
        identity=identity,
        schemas=schemas,
        **kwargs,
    )


def values(env: Environment, schemas: StaticTypeSchemas, identity: StackIdentity) -> dict[str, Any]:
    return dict(prepare(env, schemas, identity).parameters)


def messages(error: TemplateError) -> list[str]:
    errors = error.errors if isinstance(error, TemplateErrors) else [error]
    return [e.format() for e in errors]


BASE = """\
parameters:
  name: web
  hosts: a,b
  config: {db: {port: 5432, opts: [x]}, log: info}
"""
MORE = """\
parameters:
  name: -1
  hosts: [c]
  config: {db: {user: app, opts: [y]}, log: null}
"""


def test_without_strategies_later_files_overwrite(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    result = values(environment(BASE, MORE), schemas, identity)
    assert result["name"] == "-1"
    assert result["hosts"] == ["c"]
    assert result["config"] == {"db": {"user": "app", "opts": ["y"]}, "log": None}


def test_merge_concatenates_strings_extends_lists_and_updates_maps(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    base = "parameter_merge_strategies: {default: merge}\n" + BASE
    result = values(environment(base, MORE), schemas, identity)
    assert result["name"] == "web-1"
    assert result["hosts"] == ["a", "b", "c"]
    # a shallow update: db is replaced whole; a null value does not remove log
    assert result["config"] == {"db": {"user": "app", "opts": ["y"]}, "log": "info"}


def test_deep_merge_merges_json_at_every_level(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    base = "parameter_merge_strategies: {config: deep_merge, name: deep_merge}\n" + BASE
    result = values(environment(base, MORE), schemas, identity)
    assert result["config"] == {
        "db": {"port": 5432, "user": "app", "opts": ["x", "y"]},
        "log": "info",
    }
    assert result["name"] == "web-1"  # deep_merge is merge for other types
    assert result["hosts"] == ["c"]  # no entry, no default: overwrite


def test_the_first_file_to_set_a_parameter_fixes_its_strategy(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    first = "parameter_merge_strategies: {hosts: merge}\nparameters: {hosts: a}\n"
    # the second file has no entry (and a default) but follows the first file's strategy;
    # its default applies to what it sets first
    second = (
        "parameter_merge_strategies: {default: merge}\n"
        "parameters: {hosts: b, name: x}\nparameter_defaults: {}\n"
    )
    third = "parameters: {hosts: c, name: y}\n"
    result = values(environment(first, second, third), schemas, identity)
    assert result["hosts"] == ["a", "b", "c"]
    assert result["name"] == "xy"


def test_parameter_defaults_merge_too(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    first = "parameter_merge_strategies: {hosts: merge}\nparameter_defaults: {hosts: a}\n"
    second = "parameter_defaults: {hosts: [b]}\n"
    assert values(environment(first, second), schemas, identity)["hosts"] == ["a", "b"]


def test_given_values_stay_above_merged_ones(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    base = "parameter_merge_strategies: {default: merge}\n" + BASE
    definition = prepare(environment(base, MORE), schemas, identity, parameters={"name": "x"})
    assert definition.parameters["name"] == "x"


def test_a_single_file_with_strategies_is_taken_as_it_is(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    base = "parameter_merge_strategies: {default: merge}\n" + BASE
    assert values(environment(base), schemas, identity)["hosts"] == ["a", "b"]


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (
            (
                "parameters: {hosts: a}\n",
                "parameter_merge_strategies:\n  hosts: merge\nparameters: {hosts: b}\n",
            ),
            "env2.yaml:2: parameter_merge_strategies.hosts: conflicting merge strategy 'merge' "
            "for parameter 'hosts': it is 'overwrite' (the default) since env1.yaml gave it a "
            "value (a parameter keeps the strategy of the first file that sets it)",
        ),
        (
            (
                "parameter_merge_strategies:\n  hosts: merge\nparameters: {hosts: a}\n",
                "parameters: {hosts: b}\n",
                "parameter_merge_strategies:\n  default: merge\n  hosts: deep_merge\n"
                "parameter_defaults: {hosts: c}\n",
            ),
            "env3.yaml:3: parameter_merge_strategies.hosts: conflicting merge strategy "
            "'deep_merge' for parameter 'hosts': it is 'merge' since env1.yaml gave it a value",
        ),
        (
            (
                "parameter_merge_strategies:\n  default: merge\nparameters: {count: 1}\n",
                "parameters: {count: 2}\n",
            ),
            "env1.yaml:2: parameter_merge_strategies.default: invalid merge strategy 'merge' "
            "for parameter 'count': a number parameter can only be overwritten",
        ),
        (
            (
                "parameter_merge_strategies:\n  debug: deep_merge\nparameters: {debug: true}\n",
                "parameters: {debug: false}\n",
            ),
            "env1.yaml:2: parameter_merge_strategies.debug: invalid merge strategy 'deep_merge' "
            "for parameter 'debug': a boolean parameter can only be overwritten",
        ),
        (
            (
                "parameter_merge_strategies: {config: merge}\nparameters: {config: [1]}\n",
                "parameters: {config: {a: 1}}\n",
            ),
            "t.yaml:5: parameters.config: invalid value merged from env1.yaml, env2.yaml for "
            "parameter 'config': cannot merge a map into a list",
        ),
        (
            (
                "parameter_merge_strategies: {config: merge}\nparameters: {config: {a: 1}}\n",
                "parameters: {config: '{broken'}\n",
            ),
            "t.yaml:5: parameters.config: invalid value from env2.yaml for parameter 'config': "
            "not valid JSON",
        ),
    ],
)
def test_strategy_problems(
    schemas: StaticTypeSchemas, identity: StackIdentity, texts: tuple[str, ...], expected: str
) -> None:
    with pytest.raises(TemplateError) as info:
        values(environment(*texts), schemas, identity)
    assert any(message.startswith(expected) for message in messages(info.value)), messages(
        info.value
    )


def test_constraints_apply_to_the_merged_value(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    template = TEMPLATE + "  short: {type: string, constraints: [{length: {max: 3}}]}\n"
    first = "parameter_merge_strategies: {short: merge}\nparameters: {short: ab}\n"
    with pytest.raises(TemplateError) as info:
        prepare(environment(first, "parameters: {short: cd}\n"), schemas, identity, template)
    assert messages(info.value) == [
        "t.yaml:8: parameters.short: invalid value merged from env1.yaml, env2.yaml for "
        "parameter 'short': length (4) is out of range (min: None, max: 3)"
    ]


def test_undeclared_parameters_are_still_reported(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    first = "parameter_merge_strategies: {default: merge}\nparameters: {name: a}\n"
    with pytest.raises(TemplateError) as info:
        values(environment(first, "parameters: {nmae: b}\n"), schemas, identity)
    assert messages(info.value) == [
        "env2.yaml:1: parameters.nmae: parameter 'nmae' was not defined in the template "
        "(did you mean 'name'?)"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "parameter_merge_strategies:\n  default: merg\n",
            "env.yaml:2: parameter_merge_strategies.default: invalid merge strategy 'merg' "
            "(did you mean 'merge'?); acceptable values: overwrite, merge, deep_merge",
        ),
        (
            "parameter_merge_strategies:\n  p: [merge]\n",
            "env.yaml:2: parameter_merge_strategies.p: invalid merge strategy ['merge']",
        ),
        (
            "parameter_merge_strategies: merge\n",
            "env.yaml:1: parameter_merge_strategies: parameter_merge_strategies must be a map",
        ),
    ],
)
def test_unknown_strategies_are_refused_when_the_file_is_read(text: str, expected: str) -> None:
    with pytest.raises(TemplateError) as info:
        load_environment(text, "env.yaml")
    assert str(info.value).startswith(expected)


def test_the_stored_form_gives_the_same_values(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    base = "parameter_merge_strategies: {default: merge, config: deep_merge}\n" + BASE
    env = environment(base, MORE, "resource_registry: {My::T: OS::Heat::None}\n")
    data = env.to_data()
    assert [layer["file"] for layer in data["parameter_layers"]] == ["env1.yaml", "env2.yaml"]
    again = environment_from_data(yaml.safe_load(yaml.safe_dump(data)))
    assert values(again, schemas, identity) == values(env, schemas, identity)
    assert again.to_data() == data
    # merged once more with another file, the layers stay in order
    later = merge_environments([again, load_environment("parameters: {hosts: d}\n", "env9.yaml")])
    assert values(later, schemas, identity)["hosts"] == ["a", "b", "c", "d"]


def test_stored_layers_are_checked(identity: StackIdentity) -> None:
    with pytest.raises(TemplateError) as info:
        environment_from_data({"parameter_layers": [{"parameters": {}, "extra": 1}]}, "stored")
    assert str(info.value).startswith("stored: parameter_layers[0]: a layer is a map of file")
    bad = {"parameter_layers": [{"file": "e.yaml", "parameter_merge_strategies": {"p": "x"}}]}
    with pytest.raises(TemplateError, match=r"e.yaml: parameter_merge_strategies.p: invalid"):
        environment_from_data(bad)


def test_a_nested_stack_merges_the_parameter_defaults_by_its_own_types(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    first = (
        "parameter_merge_strategies: {default: merge}\n"
        "parameters: {name: a}\nparameter_defaults: {zones: z1}\n"
    )
    second = "parameters: {name: b}\nparameter_defaults: {zones: z2}\n"
    child = child_environment(environment(first, second), "box", "My::Box", "box.yaml")
    nested = (
        "heat_template_version: 2018-08-31\nparameters:\n  zones: {type: comma_delimited_list}\n"
    )
    definition = prepare(child, schemas, identity, template=nested)
    assert definition.parameters["zones"] == ["z1", "z2"]
    assert child.parameters == {}


# --- properties ---------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3)
    ),
    max_leaves=8,
)
json_maps = st.dictionaries(st.text(max_size=2), json_values, max_size=4)


@given(json_maps, json_maps)
def test_deep_merge_keeps_every_key_and_takes_new_scalars(
    old: dict[str, Any], new: dict[str, Any]
) -> None:
    merged = merge_values(ParameterType.JSON, old, new, deep=True)
    if not old:
        assert merged == new
        return
    assert set(merged) == set(old) | {key for key, value in new.items() if value is not None}
    for key, value in new.items():
        if value is not None and not isinstance(value, dict | list | str):
            assert merged[key] == value


names = st.sampled_from(["name", "hosts", "config"])
plain_values = st.sampled_from(["a", "b,c", "", "x"])
layers = st.lists(
    st.tuples(
        st.dictionaries(names, plain_values, max_size=3),
        st.dictionaries(names | st.just("default"), st.sampled_from(["overwrite", "merge"])),
    ),
    min_size=2,
    max_size=4,
)


def layered(spec: list[tuple[dict[str, str], dict[str, str]]]) -> Environment:
    texts = [yaml.safe_dump({"parameters": p, "parameter_merge_strategies": s}) for p, s in spec]
    return environment(*texts)


def outcome(env: Environment) -> Any:
    """The prepared values, or where the problems are (messages name files a store loses)."""
    schemas, identity = StaticTypeSchemas([]), StackIdentity("s", "i", "p")
    try:
        return values(env, schemas, identity)
    except TemplateError as exc:
        return sorted(
            str(e.path) for e in (exc.errors if isinstance(exc, TemplateErrors) else [exc])
        )


@settings(max_examples=60, deadline=None)
@given(layers)
def test_stored_and_loaded_environments_prepare_alike(
    spec: list[tuple[dict[str, str], dict[str, str]]],
) -> None:
    env = layered(spec)
    assert outcome(environment_from_data(env.to_data())) == outcome(env)


@settings(max_examples=60, deadline=None)
@given(layers)
def test_overwrite_everywhere_is_the_last_file_wins(
    spec: list[tuple[dict[str, str], dict[str, str]]],
) -> None:
    overwriting = [(p, {name: "overwrite" for name in s}) for p, s in spec]
    last_wins = merge_environments(
        [load_environment(yaml.safe_dump({"parameters": p}), "e.yaml") for p, _ in spec]
    )
    assert outcome(layered(overwriting)) == outcome(last_wins)
