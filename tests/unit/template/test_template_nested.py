"""The environment a provider template's nested stack inherits (Heat's child environment)."""

from __future__ import annotations

from converge.core.template import environment_from_data
from converge.core.template.nested import child_environment

PARENT = environment_from_data(
    {
        "parameters": {"size": "big"},
        "parameter_defaults": {"region": "north"},
        "resource_registry": {
            "My::Box": "box.yaml",
            "My::Other": "other.yaml",
            "OS::Old::*": "OS::Heat::*",
            "resources": {
                "box": {"part": {"hooks": "pre-create"}, "hooks": "pre-update"},
                "b*": {"lid": {"hooks": ["post-create"]}},
                "elsewhere": {"part": {"hooks": "pre-delete"}},
            },
        },
    }
)


def test_parameters_are_dropped_and_defaults_kept() -> None:
    child = child_environment(PARENT, "box", "My::Box", "box.yaml")
    assert child.parameters == {}
    assert child.parameter_defaults == {"region": "north"}


def test_the_mapping_that_made_the_stack_is_removed_others_stay() -> None:
    child = child_environment(PARENT, "box", "My::Box", "box.yaml")
    assert "My::Box" not in child.types  # box.yaml may itself use My::Box
    assert child.implementation_type("My::Other") == "other.yaml"
    assert child.implementation_type("OS::Old::Thing") == "OS::Heat::Thing"


def test_entries_under_the_resource_name_apply_inside() -> None:
    child = child_environment(PARENT, "box", "My::Box", "box.yaml")
    assert child.hooks_for("part") == frozenset({"pre-create"})  # box.part
    assert child.hooks_for("lid") == frozenset({"post-create"})  # b*.lid (a wildcard)
    # the owner's own hook (box: pre-update) is not a hook inside the nested stack
    assert child.hooks_for("box") == frozenset()


def test_a_type_that_is_a_file_removes_nothing() -> None:
    child = child_environment(PARENT, "other", "box.yaml", "box.yaml")
    assert child.implementation_type("My::Box") == "box.yaml"
    assert child.hooks_for("part") == frozenset()
