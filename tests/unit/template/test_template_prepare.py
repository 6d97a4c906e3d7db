"""prepare_stack: conditions, references, schemas, cycles, definitions and their evaluation."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from converge.core.schema import StaticTypeSchemas
from converge.core.template import (
    StackDefinition,
    StackIdentity,
    load_template,
    prepare_stack,
)
from converge.core.template.nodes import ALL_ATTRIBUTES
from converge.errors import TemplateError, TemplateErrors


def prepare(
    body: str,
    schemas: StaticTypeSchemas,
    identity: StackIdentity,
    version: str = "2021-04-16",
    **kwargs: Any,
) -> StackDefinition:
    text = f"heat_template_version: {version}\n" + body
    return prepare_stack(
        load_template(text, "stack.yaml"), identity=identity, schemas=schemas, **kwargs
    )


def problems(
    body: str, schemas: StaticTypeSchemas, identity: StackIdentity, **kwargs: Any
) -> list[str]:
    with pytest.raises(TemplateError) as info:
        prepare(body, schemas, identity, **kwargs)
    error = info.value
    return [e.format() for e in (error.errors if isinstance(error, TemplateErrors) else [error])]


class Data:
    """What converged resources reported, as the engine would pass it."""

    def __init__(self, ids: Mapping[str, Any], attributes: Mapping[str, Mapping[str, Any]]):
        self.ids = ids
        self.attrs = attributes

    def reference_id(self, name: str) -> Any:
        return self.ids[name]

    def attributes(self, name: str) -> Mapping[str, Any]:
        return self.attrs.get(name, {})


STACK = """\
description: web and db
parameters:
  image: {type: string, default: cirros}
resources:
  db:
    type: Test::Server
    properties:
      image: {get_param: image}
  web:
    type: Test::Server
    deletion_policy: retain
    depends_on: db
    metadata: {role: web}
    properties:
      image: {list_join: ['-', [{get_param: image}, {get_attr: [db, address]}]]}
      count: "3"
      networks: [{get_resource: db}]
  all:
    type: Test::Value
    properties:
      value: {get_attr: [web]}
outputs:
  address:
    description: where
    value: {get_attr: [web, address]}
"""


def test_definitions(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    definition = prepare(STACK, schemas, identity)
    assert definition.description == "web and db"
    assert list(definition.resources) == ["db", "web", "all"]
    db, web = definition.resources["db"], definition.resources["web"]
    assert db.properties == {"image": "cirros"}
    assert db.requires == frozenset()
    assert web.depends_on == ("db",)
    assert web.requires == {"db"}
    assert web.deletion_policy == "Retain" and web.deletion_policy_stated
    assert db.deletion_policy == "Delete" and not db.deletion_policy_stated
    assert web.metadata == {"role": "web"}
    assert definition.resources["all"].requires == {"web"}
    assert web.where.line == 10
    order = definition.graph().topological_order()
    assert order.index("db") < order.index("web") < order.index("all")
    assert definition.attributes_needed() == {
        "db": frozenset({"address"}),
        "web": frozenset({"address", ALL_ATTRIBUTES}),
    }


def test_resolve_properties_and_outputs(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    definition = prepare(STACK, schemas, identity)
    data = Data(
        {"db": "db-id", "web": "web-id"},
        {"db": {"address": "10.0.0.2"}, "web": {"address": "10.0.0.3"}},
    )
    assert definition.resources["web"].resolve_properties(data) == {
        "image": "cirros-10.0.0.2",
        "count": 3,
        "networks": ["db-id"],
        "flavor": "small",
    }
    assert definition.resources["all"].resolve_properties(data) == {
        "value": {"address": "10.0.0.3"}
    }
    assert definition.outputs["address"].resolve(data) == "10.0.0.3"
    assert definition.outputs["address"].description == "where"


def test_resolve_properties_checks_runtime_values(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    body = "resources:\n  a: {type: Test::Value}\n  s:\n    type: Test::Server\n    properties:\n      image: x\n      flavor: {get_attr: [a, value]}\n"
    definition = prepare(body, schemas, identity)
    with pytest.raises(
        TemplateError, match=r"resources.s.properties.flavor: \"huge\" is not an allowed value"
    ):
        definition.resources["s"].resolve_properties(Data({}, {"a": {"value": "huge"}}))


def test_validation_messages(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    body = """\
resources:
  web:
    type: Test::Server
    properties:
      imgae: cirros
      count: many
      flavor: medium
  other:
    type: Test::Servr
  val:
    type: Test::Value
    propertes: {}
    depends_on: [wbe]
    properties:
      value: {get_attr: [web, adress]}
outputs:
  out:
    value: {get_resource: nothing}
"""
    found = problems(body, schemas, identity)
    assert (
        "stack.yaml:6: resources.web.properties.imgae: unknown property 'imgae' (did you mean 'image'?)"
        in found
    )
    assert "stack.yaml:5: resources.web.properties: missing required property 'image'" in found
    assert "stack.yaml:7: resources.web.properties.count: expected an integer, got 'many'" in found
    assert any(
        "properties.flavor: \"medium\" is not an allowed value ['small', 'large']" in m
        for m in found
    )
    assert (
        "stack.yaml:10: resources.other.type: unknown resource type 'Test::Servr' (did you mean 'Test::Server'?)"
        in found
    )
    assert (
        "stack.yaml:13: resources.val.propertes: unknown key 'propertes' (did you mean 'properties'?)"
        in found
    )
    assert (
        "stack.yaml:14: resources.val.depends_on[0]: depends_on: unknown resource 'wbe' (did you mean 'web'?)"
        in found
    )
    assert any(
        "resource 'web' (Test::Server) has no attribute 'adress' (did you mean 'address'?)" in m
        for m in found
    )
    assert any("outputs.out.value: unknown resource 'nothing'" in m for m in found)


def test_dependency_cycle(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    body = """\
resources:
  a: {type: Test::Value, properties: {value: {get_resource: b}}}
  b: {type: Test::Value, properties: {value: {get_attr: [c, value]}}}
  c: {type: Test::Value, depends_on: a}
  d: {type: Test::Value, depends_on: d}
"""
    found = problems(body, schemas, identity)
    assert found == ["stack.yaml:3: resources.a: dependency cycle: a -> b -> c -> a"]
    body = "resources:\n  d: {type: Test::Value, depends_on: d}\n"
    assert problems(body, schemas, identity) == [
        "stack.yaml:3: resources.d: dependency cycle: d -> d"
    ]


CONDITIONS = """\
parameters:
  env: {type: string, default: prod}
conditions:
  is_prod: {equals: [{get_param: env}, prod]}
  is_dev: {not: is_prod}
  both: {and: [is_prod, {not: is_dev}]}
resources:
  prod_only:
    type: Test::Value
    condition: is_prod
    properties: {value: 1}
  dev_only:
    type: Test::Value
    condition: is_dev
  inline:
    type: Test::Value
    condition: {not: is_dev}
  user:
    type: Test::Value
    depends_on: [dev_only]
    properties:
      value:
        - {get_attr: [dev_only, value]}
        - {get_resource: dev_only}
        - {if: [is_prod, yes_prod, no_prod]}
        - {if: [is_dev, dropped]}
outputs:
  dev: {value: {get_attr: [dev_only, value]}, condition: is_dev}
  prod: {value: 1, condition: both}
"""


def test_conditions(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    definition = prepare(CONDITIONS, schemas, identity)
    assert list(definition.resources) == ["prod_only", "inline", "user"]
    assert dict(definition.conditions) == {"is_prod": True, "is_dev": False, "both": True}
    user = definition.resources["user"]
    assert user.properties == {"value": [None, None, "yes_prod"]}
    assert user.requires == frozenset() and user.depends_on == ()
    # As in Heat, an output whose condition is false is listed with a null value.
    assert list(definition.outputs) == ["dev", "prod"]
    assert definition.outputs["dev"].value is None

    dev = prepare(CONDITIONS, schemas, identity, parameters={"env": "dev"})
    assert list(dev.resources) == ["dev_only", "user"]
    assert dev.resources["user"].requires == {"dev_only"}


def test_condition_problems(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    body = """\
conditions:
  a: {not: b}
  b: {and: [c, true]}
  c: a
  d: {get_attr: [x, y]}
resources:
  r: {type: Test::Value, condition: nope}
"""
    found = problems(body, schemas, identity)
    assert any("condition cycle: a -> b -> c -> a" in m for m in found)
    assert any("conditions.d" in m and "not allowed in a condition" in m for m in found)
    assert any("resources.r.condition: unknown condition 'nope'" in m for m in found)


def test_get_file_and_files_map(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    body = "resources:\n  v: {type: Test::Value, properties: {value: {get_file: script.sh}}}\n"
    definition = prepare(body, schemas, identity, files={"script.sh": "echo hi"})
    assert definition.resources["v"].properties == {"value": "echo hi"}
    assert any(
        "'script.sh' is not in the files map" in m for m in problems(body, schemas, identity)
    )


def test_unknown_parameter_reference(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    body = "parameters:\n  size: {type: number, default: 1}\nresources:\n  v: {type: Test::Value, properties: {value: {get_param: sise}}}\n"
    assert any(
        "unknown parameter 'sise' (did you mean 'size'?)" in m
        for m in problems(body, schemas, identity)
    )


def test_missing_parameter_still_validates_resources(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    body = "parameters:\n  image: {type: string}\nresources:\n  s: {type: Test::Server, properties: {image: {get_param: image}, flavr: x}}\n"
    found = problems(body, schemas, identity)
    assert len(found) == 2
    assert "needs a value" in found[0]
    assert "unknown property 'flavr'" in found[1]


def test_if_on_a_condition_waiting_for_a_parameter_value(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    # Was a raw ``Unresolved: cd1`` traceback: the output's ``if`` could not pick a branch.
    body = (
        "parameters:\n  p1: {type: string}\n"
        "conditions:\n  cd1: {equals: [{get_param: p1}, x]}\n"
        "resources:\n  v:\n    type: Test::Value\n"
        "    properties: {value: {if: [cd1, {list_join: [',', [a, {if: [cd1, b, c]}]]}, d]}}\n"
        "outputs:\n  o: {value: {if: [cd1, a, b]}}\n"
    )
    assert problems(body, schemas, identity) == [
        "stack.yaml:3: parameters.p1: parameter 'p1' needs a value: it has no default "
        "and none was given"
    ]
    definition = prepare(body, schemas, identity, parameters={"p1": "x"})
    assert definition.outputs["o"].value == "a"
    assert definition.resources["v"].properties == {"value": "a,b"}


def test_resource_shape_problems(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    body = """\
resources:
  a: [x]
  b: {properties: {}}
  c: {type: Test::Value, properties: [1]}
  d: {type: Test::Value, deletion_policy: Destroy}
  e: {type: Test::Value, depends_on: {x: 1}}
"""
    found = problems(body, schemas, identity)
    assert any("resources.a: a resource must be a map" in m for m in found)
    assert any("resources.b: missing type" in m for m in found)
    assert any("resources.c.properties: properties must be a map" in m for m in found)
    assert any("invalid deletion_policy 'Destroy'" in m for m in found)
    assert any("depends_on must be a resource name or a list" in m for m in found)


def test_open_type_accepts_any_property_and_attribute(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    body = "resources:\n  n: {type: OS::Heat::None, properties: {anything: 1}}\n  v: {type: Test::Value, properties: {value: {get_attr: [n, whatever]}}}\n"
    definition = prepare(body, schemas, identity)
    assert definition.resources["v"].requires == {"n"}


def test_external_id_and_update_policy_are_kept(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    body = "parameters:\n  id: {type: string, default: abc}\nresources:\n  v:\n    type: Test::Value\n    external_id: {get_param: id}\n    update_policy: {pause: 1}\n    description: kept\n"
    v = prepare(body, schemas, identity).resources["v"]
    assert (v.external_id, v.update_policy, v.description) == ("abc", {"pause": 1}, "kept")


def test_ten_thousand_resources(schemas: StaticTypeSchemas, identity: StackIdentity) -> None:
    lines = ["resources:"]
    for i in range(10_000):
        value = f"{{get_attr: [r{i // 2}, value]}}" if i else "root"
        lines.append(f"  r{i}: {{type: Test::Value, properties: {{value: {value}}}}}")
    definition = prepare("\n".join(lines) + "\n", schemas, identity)
    assert len(definition.resources) == 10_000
    assert definition.resources["r9999"].requires == {"r4999"}
