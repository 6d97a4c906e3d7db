"""CFN templates (Heat's CfnTemplate and HeatTemplate): versions, sections, keys,
parameters, conditions and mappings, prepared into the same StackDefinition as HOT."""

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
    pseudo_parameters,
)
from converge.core.template.parameters import ParameterType, parameter_schemas
from converge.errors import TemplateError, TemplateErrors

AWS = "AWSTemplateFormatVersion: '2010-09-09'\n"
HEAT = "HeatTemplateFormatVersion: '2012-12-12'\n"


def prepare(
    text: str, schemas: StaticTypeSchemas, identity: StackIdentity, **kwargs: Any
) -> StackDefinition:
    return prepare_stack(
        load_template(text, "stack.yaml"), identity=identity, schemas=schemas, **kwargs
    )


def problems(
    text: str, schemas: StaticTypeSchemas, identity: StackIdentity, **kwargs: Any
) -> list[str]:
    with pytest.raises(TemplateError) as info:
        prepare(text, schemas, identity, **kwargs)
    error = info.value
    return [e.format() for e in (error.errors if isinstance(error, TemplateErrors) else [error])]


class Data:
    def __init__(self, ids: Mapping[str, Any], attributes: Mapping[str, Mapping[str, Any]]):
        self.ids = ids
        self.attrs = attributes

    def reference_id(self, name: str) -> Any:
        return self.ids[name]

    def attributes(self, name: str) -> Mapping[str, Any]:
        return self.attrs.get(name, {})


STACK = (
    AWS
    + """\
Description: web and db
Parameters:
  Image: {Type: String, Default: cirros}
  Env:
    Type: String
    Default: dev
    AllowedValues: [dev, prod]
Mappings:
  Flavors:
    dev: {Flavor: small}
    prod: {Flavor: large}
Conditions:
  IsProd: {"Fn::Equals": [{Ref: Env}, prod]}
Resources:
  db:
    Type: Test::Server
    Properties:
      image: {Ref: Image}
      flavor: {"Fn::FindInMap": [Flavors, {Ref: Env}, Flavor]}
  web:
    Type: Test::Server
    DependsOn: db
    DeletionPolicy: Retain
    Metadata: {role: web}
    Properties:
      image: {"Fn::Join": ["-", [{Ref: Image}, {Ref: "AWS::StackName"}]]}
      tags: {db: {Ref: db}, address: {"Fn::GetAtt": [db, address]}}
  backup:
    Type: Test::Value
    Condition: IsProd
Outputs:
  url:
    Description: where web is
    Value: {"Fn::Join": ["", ["http://", {"Fn::GetAtt": [web, address]}]]}
  backup:
    Value: {Ref: backup}
    Condition: IsProd
"""
)


def test_a_cfn_stack_prepares_into_the_same_definition_as_hot(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    definition = prepare(STACK, schemas, identity)
    assert definition.version.version_key == "AWSTemplateFormatVersion"
    assert definition.description == "web and db"
    assert definition.parameters == {"Image": "cirros", "Env": "dev"}
    assert definition.conditions == {"IsProd": False}
    assert list(definition.resources) == ["db", "web"]
    web = definition.resources["web"]
    assert web.depends_on == ("db",) and web.requires == frozenset({"db"})
    assert web.deletion_policy == "Retain" and web.metadata == {"role": "web"}
    assert definition.resources["db"].properties == {"image": "cirros", "flavor": "small"}
    data = Data({"db": "db-id", "web": "web-id"}, {"db": {"address": "10.0.0.1"}})
    assert web.resolve_properties(data)["image"] == "cirros-mystack"
    assert web.resolve_properties(data)["tags"] == {"db": "db-id", "address": "10.0.0.1"}
    assert definition.attributes_needed() == {
        "db": frozenset({"address"}),
        "web": frozenset({"address"}),
    }
    # an output whose condition is false is listed with a null value, as for HOT
    assert definition.outputs["backup"].value is None
    web_data = Data({}, {"web": {"address": "10.0.0.2"}})
    assert definition.outputs["url"].resolve(web_data) == "http://10.0.0.2"
    assert definition.outputs["url"].description == "where web is"


def test_a_true_condition_enables_its_resource_and_output(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    definition = prepare(STACK, schemas, identity, parameters={"Env": "prod"})
    assert list(definition.resources) == ["db", "web", "backup"]
    assert definition.resources["db"].properties["flavor"] == "large"
    assert definition.outputs["backup"].resolve(Data({"backup": "b-id"}, {})) == "b-id"


def test_pseudo_parameters_are_heats_aws_ones(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        AWS
        + """\
Resources:
  v:
    Type: Test::Value
    Properties:
      value: [{Ref: "AWS::StackName"}, {Ref: "AWS::StackId"}, {Ref: "AWS::Region"}]
"""
    )
    definition = prepare(text, schemas, identity)
    assert definition.resources["v"].properties["value"] == [
        "mystack",
        "arn:openstack:heat::project-1:stacks/mystack/stack-id-1",
        "ap-southeast-1",
    ]
    assert pseudo_parameters(definition.version, identity)["AWS::Region"] == "ap-southeast-1"
    # HOT's pseudo parameters are not CFN's
    assert "OS::stack_name" not in pseudo_parameters(definition.version, identity)


# --- versions and sections ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "AWSTemplateFormatVersion: '2012-12-12'\nResources: {}\n",
            "stack.yaml:1: AWSTemplateFormatVersion: unknown AWSTemplateFormatVersion "
            "'2012-12-12'; the valid version is 2010-09-09",
        ),
        (
            "HeatTemplateFormatVersion: '2010-09-09'\nResources: {}\n",
            "unknown HeatTemplateFormatVersion '2010-09-09'; the valid version is 2012-12-12",
        ),
        (
            AWS + "heat_template_version: 2021-04-16\n",
            "ambiguous template versions: heat_template_version, AWSTemplateFormatVersion",
        ),
        ("Resources: {}\n", "missing heat_template_version"),
        (AWS + "resources: {}\n", "stack.yaml:2: resources: unknown section 'resources' "),
        (HEAT + "Conditions: {}\n", "Conditions need AWSTemplateFormatVersion 2010-09-09"),
        (AWS + "Mappings: [a]\n", "stack.yaml:2: Mappings: Mappings must be a mapping"),
        (AWS + "Description: [a]\n", "Description: Description must be a string"),
    ],
)
def test_versions_and_sections_as_heat_reads_them(text: str, message: str) -> None:
    with pytest.raises(TemplateError) as caught:
        load_template(text, "stack.yaml")
    assert message in str(caught.value)


def test_hot_section_names_are_not_cfn_ones() -> None:
    with pytest.raises(TemplateError, match="unknown section 'parameters' \\(did you mean"):
        load_template(AWS + "parameters: {}\n", "stack.yaml")


# --- resources and outputs: keys, with CFN paths and lines ---------------------------------


def test_errors_name_cfn_paths_and_lines(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        AWS
        + """\
Resources:
  a:
    Type: Test::Server
    Properties:
      image: x
      flavour: small
  b:
    Type: Test::Value
    DependsOn: [zz]
    DeletionPolicy: retain
    depends_on: a
    Properties:
      value: {Ref: nothing}
  c:
    Properties: {}
  d:
    Type: Test::Value
    Condition: Missing
Outputs:
  o:
    Value: {"Fn::GetAtt": [a, nope]}
    description: x
"""
    )
    found = problems(text, schemas, identity)
    assert "stack.yaml:7: Resources.a.Properties.flavour: unknown property 'flavour'" in "\n".join(
        found
    )
    expected = [
        "stack.yaml:10: Resources.b.DependsOn[0]: DependsOn: unknown resource 'zz'",
        "stack.yaml:11: Resources.b.DeletionPolicy: invalid DeletionPolicy 'retain'; "
        "expected one of: Delete, Retain, Snapshot",
        "stack.yaml:12: Resources.b.depends_on: unknown key 'depends_on'",
        "stack.yaml:14: Resources.b.Properties.value: Ref: unknown parameter 'nothing'",
        "stack.yaml:15: Resources.c: missing Type",
        "stack.yaml:19: Resources.d.Condition: unknown condition 'Missing'",
        "stack.yaml:22: Outputs.o.Value: resource 'a' (Test::Server) has no attribute 'nope'",
        "stack.yaml:23: Outputs.o.description: unknown key 'description' "
        "(did you mean 'Description'?)",
    ]
    for line in expected:
        assert any(problem.startswith(line) for problem in found), (line, found)


def test_heat_template_format_has_no_conditions(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    # Heat's HeatTemplate: no Conditions section, no Condition key, and Fn::If is data.
    text = (
        HEAT
        + """\
Resources:
  a:
    Type: OS::Heat::None
    Condition: x
    Properties:
      v: {"Fn::If": [c, 1, 2]}
"""
    )
    assert problems(text, schemas, identity) == [
        "stack.yaml:5: Resources.a.Condition: unknown key 'Condition'"
    ]
    definition = prepare(text.replace("    Condition: x\n", ""), schemas, identity)
    assert definition.resources["a"].properties == {"v": {"Fn::If": ["c", 1, 2]}}


def test_depends_on_takes_a_name_or_a_list(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        AWS
        + """\
Resources:
  a: {Type: OS::Heat::None}
  b: {Type: OS::Heat::None, DependsOn: a}
  c: {Type: OS::Heat::None, DependsOn: [a, b]}
  d: {Type: OS::Heat::None, DependsOn: {a: 1}}
"""
    )
    assert problems(text, schemas, identity) == [
        "stack.yaml:6: Resources.d.DependsOn: DependsOn must be a resource name or a list of them"
    ]
    definition = prepare(
        text.replace("  d: {Type: OS::Heat::None, DependsOn: {a: 1}}\n", ""), schemas, identity
    )
    assert definition.resources["c"].depends_on == ("a", "b")


def test_a_cycle_through_ref_is_reported(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        AWS
        + """\
Resources:
  a: {Type: Test::Value, Properties: {value: {Ref: b}}}
  b: {Type: Test::Value, Properties: {value: {Ref: a}}}
"""
    )
    assert any("dependency cycle: a -> b -> a" in p for p in problems(text, schemas, identity))


# --- parameters ----------------------------------------------------------------------------

PARAMETERS = (
    AWS
    + """\
Parameters:
  Name:
    Type: String
    MinLength: 2
    MaxLength: '4'
    AllowedPattern: '[a-z]*'
    ConstraintDescription: lower-case, 2 to 4 letters
    Description: a name
    Label: The name
  Count: {Type: Number, MinValue: 1, MaxValue: 3, Default: '2'}
  Zones: {Type: CommaDelimitedList, Default: 'a, b'}
  Extra: {Type: Json, Default: {"k": 1}}
  Debug: {Type: Boolean, Default: 'true'}
  Secret: {Type: String, NoEcho: 'TRUE', Default: hush}
Resources: {}
"""
)


def test_parameters_become_the_same_schemas_as_hot() -> None:
    schemas, errors = parameter_schemas(load_template(PARAMETERS, "stack.yaml"))
    assert errors == []
    name = schemas["Name"]
    assert name.type is ParameterType.STRING and name.description == "a name"
    assert name.label == "The name" and not name.has_default
    assert [(c.kind, c.value, c.description) for c in name.constraints] == [
        ("length", {"min": 2, "max": "4"}, "lower-case, 2 to 4 letters"),
        ("allowed_pattern", "[a-z]*", "lower-case, 2 to 4 letters"),
    ]
    assert schemas["Count"].default == 2
    assert schemas["Zones"].type is ParameterType.COMMA_DELIMITED_LIST
    assert schemas["Zones"].default == ["a", "b"]
    assert schemas["Extra"].default == {"k": 1}
    assert schemas["Debug"].default is True
    assert schemas["Secret"].hidden and not schemas["Name"].hidden


def test_parameter_values_are_checked_with_the_constraint_description(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    found = problems(PARAMETERS, schemas, identity, parameters={"Name": "ABC", "Count": 9})
    assert any(
        p.startswith("stack.yaml:3: Parameters.Name: invalid value given for parameter 'Name': ")
        and "lower-case, 2 to 4 letters" in p
        for p in found
    ), found
    assert any("Parameters.Count: invalid value given for parameter 'Count'" in p for p in found)
    definition = prepare(PARAMETERS, schemas, identity, parameters={"Name": "abc"})
    assert definition.hidden_parameters == frozenset({"Secret"})
    assert definition.parameter_texts()["Secret"] == "******"


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ("{Type: Strin}", "Parameters.P.Type: unknown parameter Type 'Strin' (did you mean"),
        ("{Default: 1}", "Parameters.P: missing Type (String, Number,"),
        ("{Type: [String]}", "Parameters.P.Type: unknown parameter Type ['String']"),
        ("{Type: String, type: x}", "Parameters.P.type: unknown key 'type' (did you mean 'Type'?)"),
        (
            "{Type: String, MinValue: 1}",
            "Parameters.P.MinValue: MinValue is not valid for a String",
        ),
        ("{Type: Number, MinLength: 1}", "Parameters.P.MinLength: MinLength is not valid"),
        ("{Type: Number, MaxValue: lots}", "Parameters.P.MaxValue: MaxValue: range:"),
        ("{Type: String, AllowedValues: a}", "AllowedValues: allowed_values needs a list"),
        ("{Type: String, Default: x, AllowedValues: [a]}", "Parameters.P.Default: invalid Default"),
        ("[String]", "Parameters.P: a parameter must be a map with at least a Type"),
    ],
)
def test_parameter_declarations_are_checked(
    declaration: str, message: str, schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = AWS + f"Parameters:\n  P: {declaration}\nResources: {{}}\n"
    # an invalid default is an error where it is used (a given value makes it a note)
    values = {} if "Default" in message else {"P": "a"}
    found = problems(text, schemas, identity, parameters=values)
    assert any(message in p for p in found), found


def test_pseudo_parameters_cannot_be_declared(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = AWS + "Parameters:\n  AWS::Region: {Type: String}\nResources: {}\n"
    assert problems(text, schemas, identity) == [
        "stack.yaml:3: Parameters.AWS::Region: AWS::Region is a pseudo parameter and cannot be "
        "declared"
    ]


def test_validate_without_values_notes_them(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    definition = prepare(PARAMETERS, schemas, identity, require_values=False)
    assert "parameter 'Name' has no value: plan and apply will need one" in definition.notes


# --- conditions and mappings ----------------------------------------------------------------


def test_conditions_combine_and_refer_to_each_other(
    schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = (
        AWS
        + """\
Parameters:
  Env: {Type: String, Default: prod}
  Zone: {Type: String, Default: a}
Mappings:
  Zones: {a: {Primary: 'true'}}
Conditions:
  IsProd: {"Fn::Equals": [{Ref: Env}, prod]}
  IsPrimary: {"Fn::Equals": [{"Fn::FindInMap": [Zones, {Ref: Zone}, Primary]}, 'true']}
  Both: {"Fn::And": [IsProd, IsPrimary]}
  Neither: {"Fn::Not": [{"Fn::Or": [IsProd, IsPrimary]}]}
Resources: {}
"""
    )
    definition = prepare(text, schemas, identity)
    assert definition.conditions == {
        "IsProd": True,
        "IsPrimary": True,
        "Both": True,
        "Neither": False,
    }


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ('{"Fn::Equals": [{Ref: db}, x]}', "Conditions.C.Fn::Equals[0]: unknown parameter 'db'"),
        ('{"Fn::GetAtt": [db, a]}', "Conditions.C: Fn::GetAtt is not allowed in a condition"),
        ("{Fn::Foo: 1}", "Conditions.C: a condition must be a boolean, a condition name"),
        ("[C]", "Conditions.C: a condition must be a boolean, a condition name"),
    ],
)
def test_condition_errors_name_the_place(
    condition: str, message: str, schemas: StaticTypeSchemas, identity: StackIdentity
) -> None:
    text = AWS + f"Conditions:\n  C: {condition}\nResources:\n  db: {{Type: OS::Heat::None}}\n"
    found = problems(text, schemas, identity)
    assert any(message in p for p in found), found
