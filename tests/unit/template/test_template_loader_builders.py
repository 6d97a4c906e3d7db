"""The loader's two YAML builders: the quick one (data only) agrees with the careful one
(data, lines, every check), and lines are still there when an error asks for them."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from converge.core.schema import (
    PropertySchema,
    PropertyType,
    ResourceTypeSchema,
    StaticTypeSchemas,
)
from converge.core.template import StackIdentity, load_template, loader, prepare_stack
from converge.core.template.loader import DEFAULT_LIMITS, Limits, load_document
from converge.errors import TemplateError, TemplateErrors

_QUICK_GIVES_UP = (loader._Unusual, loader._Problem, yaml.YAMLError)


def _agree(text: str, limits: Limits = DEFAULT_LIMITS) -> None:
    """Where the quick builder makes data, the careful one makes the same (types included)."""
    try:
        quick = loader._quick_data(text, limits)
    except _QUICK_GIVES_UP:
        return
    careful = loader._parse_yaml(text, limits).root
    assert repr(quick) == repr(careful)


# Pieces of YAML, so that generated texts hold words and numbers the resolver types.
_TOKENS = [
    *"ab:-[]{}&*!,\"' \n\t#|>%@`?.0~",
    "yes", "No", "on", "OFF", "true", "False", "null", "NULL", "y", "n", "0x1f", "017",
    "1_000", "1.5e3", ".inf", "-.nan", "2016-10-14", "12:30:00", "<<", "=", "!!str ",
    "!!int ", "&x ", "*x", "- ", ": ", "\n  ", "'q'", '"d"', "---\n", "...\n",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_TOKENS), max_size=40).map("".join))
def test_quick_and_careful_builders_agree_on_any_text(text: str) -> None:
    _agree(text)


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(["yes", "on", "Off", "~", "null", "0o17", "0x10", "<<", "=", "2016-10-14"]),
)
_documents = st.recursive(
    _scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(_scalars, children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(_documents, st.sampled_from([None, True, False]))
def test_quick_and_careful_builders_agree_on_dumped_documents(
    data: object, flow: bool | None
) -> None:
    _agree(yaml.safe_dump(data, default_flow_style=flow))


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=8), st.sampled_from(sorted(loader._TYPED_WORDS))))
def test_the_string_shortcut_agrees_with_the_resolver(value: str) -> None:
    if value[:1] in ("!", "&", "*"):
        return  # YAML indicators: no plain scalar starts with one
    shortcut = bool(value) and value[0] not in loader._MAYBE_TYPED
    if shortcut and value not in loader._TYPED_WORDS:
        tag = loader._RESOLVER.resolve(yaml.ScalarNode, value, (True, False))
        assert tag == "tag:yaml.org,2002:str"


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.integers().map(str),
        st.from_regex(r"[-+]?[0-9_:]{1,8}", fullmatch=True),
        st.sampled_from(["0", "-0", "+0", "00", "017", "0009", "1_000", "190:20:30", "+"]),
    )
)
def test_the_decimal_shortcut_agrees_with_the_resolver_and_constructor(value: str) -> None:
    # A plain decimal integer skips PyYAML's resolver and constructor (ints were 4x slower
    # to load than strings); it must make exactly what they make.
    if loader._DECIMAL.match(value):
        node = yaml.ScalarNode(
            loader._RESOLVER.resolve(yaml.ScalarNode, value, (True, False)), value
        )
        expected = loader._CONSTRUCTOR.construct_object(node)
        assert type(expected) is int and expected == int(value)
    try:
        expected_data = yaml.safe_load(f"a: {value}\n")
    except yaml.YAMLError:
        return  # not a scalar at all (":", "-")
    assert repr(loader.load_document(f"a: {value}\n", "t.yaml")[0]) == repr(expected_data)


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # anchors and aliases
        "base: &b {x: 1}\nr: {<<: *b, y: 2}\n",  # a merge key
        "a: !!map {b: 1}\n",  # a tagged collection
        "a: 1\na: 2\n",  # a duplicate key
        "? [a]\n: b\n",  # a collection as a key
        "a: 1\n---\nb: 2\n",  # two documents
        "a: [1,\n",  # a syntax error
        "[" * 150 + "]" * 150,  # too deep
    ],
)
def test_unusual_documents_are_left_to_the_careful_builder(text: str) -> None:
    with pytest.raises(_QUICK_GIVES_UP):
        loader._quick_data(text, DEFAULT_LIMITS)


def test_an_empty_tagged_number_is_a_located_error() -> None:
    with pytest.raises(TemplateError, match="'' is not a valid int") as info:
        load_document("a: 1\nb: !!int\n", "t.yaml")
    assert info.value.line == 2


def test_the_quick_builder_honours_the_value_limit() -> None:
    with pytest.raises(loader._Unusual):
        loader._quick_data("[1, 2, 3, 4]", Limits(max_nodes=3))
    with pytest.raises(TemplateError, match="too large"):
        load_document("[1, 2, 3, 4]", "t.yaml", limits=Limits(max_nodes=3))


def test_lines_are_found_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    careful = loader._parse_yaml

    def counted(text: str, limits: Limits, strict: bool = False) -> object:
        calls.append(text)
        return careful(text, limits, strict)

    monkeypatch.setattr(loader, "_parse_yaml", counted)
    text = "heat_template_version: 2021-04-16\nresources:\n  a:\n    type: OS::Heat::None\n"
    template = load_template(text, "t.yaml")
    assert calls == []
    assert template.source_map.line_of(("resources", "a", "type")) == 4
    assert template.source_map.line_of(("resources", "a")) == 3
    assert len(calls) == 1


SCHEMAS = StaticTypeSchemas(
    [
        ResourceTypeSchema(
            "My::Server",
            {
                "image": PropertySchema(PropertyType.STRING),
                "flavor": PropertySchema(PropertyType.STRING),
            },
        )
    ]
)


def test_errors_in_a_quickly_loaded_template_name_file_line_and_path() -> None:
    lines = ["heat_template_version: 2021-04-16", "resources:"]
    for i in range(200):
        lines += [f"  r{i}:", "    type: My::Server", "    properties: {image: cirros}"]
    lines += ["  web:", "    type: My::Server", "    properties:", "      imgae: cirros"]
    with pytest.raises(TemplateError) as info:
        prepare_stack(
            load_template("\n".join(lines) + "\n", "bench.yaml"),
            identity=StackIdentity("s", "id", "p"),
            schemas=SCHEMAS,
        )
    assert not isinstance(info.value, TemplateErrors)
    assert str(info.value) == (
        f"bench.yaml:{len(lines)}: resources.web.properties.imgae: "
        "unknown property 'imgae' (did you mean 'image'?)"
    )
