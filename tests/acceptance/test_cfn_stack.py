"""A CFN-format stack (Heat's CfnTemplate) created, updated and deleted through the API.

Checks Heat's behaviours: ``Ref`` of a resource is its physical id and of a parameter its
value, ``Fn::GetAtt`` reads an attribute and orders the stack, ``Fn::FindInMap`` reads
``Mappings``, a resource or output whose ``Condition`` is false does not exist (the
output is listed with a null value), ``AWS::StackName`` is the stack's name, and stack
show lists CFN's pseudo parameters. Asserted on the recorded world.
"""

from __future__ import annotations

import pytest

from converge.api import Converge
from converge.errors import TemplateError
from support.world import Reality

STACK = """
AWSTemplateFormatVersion: '2010-09-09'
Description: db and app, a cache in prod
Parameters:
  Tier:
    Type: String
    Default: dev
    AllowedValues: [dev, prod]
  Name: {Type: String, Default: one}
Mappings:
  Sizes:
    dev: {Fixed: small}
    prod: {Fixed: large}
Conditions:
  IsProd: {"Fn::Equals": [{Ref: Tier}, prod]}
Resources:
  db:
    Type: Test::Thing
    Properties:
      value: {Ref: Name}
      fixed: {"Fn::FindInMap": [Sizes, {Ref: Tier}, Fixed]}
  app:
    Type: Test::Thing
    Properties:
      value:
        "Fn::Join": ["-", [{Ref: "AWS::StackName"}, {"Fn::GetAtt": [db, value]}, {Ref: db}]]
  cache:
    Type: Test::Thing
    Condition: IsProd
    DependsOn: app
    Properties:
      value: {"Fn::If": [IsProd, {Ref: app}, unused]}
Outputs:
  app_value:
    Description: the app's value
    Value: {"Fn::GetAtt": [app, value]}
  cache_id:
    Value: {Ref: cache}
    Condition: IsProd
"""


def thing(reality: Reality, name: str) -> tuple[str, dict[str, object]]:
    ((physical_id, properties),) = reality.by_name(name).items()
    return physical_id, properties


async def outputs(cv: Converge, stack: str) -> dict[str, object]:
    return {o["output_key"]: o["output_value"] for o in await cv.outputs(stack)}


async def test_cfn_stack_create_update_delete(cv: Converge, reality: Reality) -> None:
    stack = await cv.create_stack("cfn", STACK)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    db_id, db = thing(reality, "db")
    assert db["value"] == "one" and db["fixed"] == "small"
    app_id, app = thing(reality, "app")
    assert app["value"] == f"cfn-one-{db_id}"
    assert reality.by_name("cache") == {}
    assert [name for action, name, _ in reality.log if action == "create"] == ["db", "app"]
    assert await outputs(cv, "cfn") == {"app_value": f"cfn-one-{db_id}", "cache_id": None}
    shown = await cv.get_stack("cfn")
    assert shown.parameters["AWS::StackName"] == "cfn"
    assert shown.parameters["AWS::StackId"].endswith(f":stacks/cfn/{stack.id}")
    assert shown.parameters["AWS::Region"] == "ap-southeast-1"
    assert shown.parameters["Tier"] == "dev"

    # prod: the mapping changes db's fixed property (a replacement), the condition makes
    # the cache, and app follows db's new id through Ref.
    stack = await cv.update_stack("cfn", STACK, parameters={"Tier": "prod"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    new_db_id, db = thing(reality, "db")
    assert new_db_id != db_id and db["fixed"] == "large"
    same_app_id, app = thing(reality, "app")
    assert same_app_id == app_id and app["value"] == f"cfn-one-{new_db_id}"
    cache_id, cache = thing(reality, "cache")
    assert cache["value"] == app_id
    assert await outputs(cv, "cfn") == {
        "app_value": f"cfn-one-{new_db_id}",
        "cache_id": cache_id,
    }

    # back to dev: the cache goes again
    stack = await cv.update_stack("cfn", STACK, parameters={"Tier": "dev"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert reality.by_name("cache") == {}

    stack = await cv.delete_stack("cfn")
    assert stack.stack_status == "DELETE_COMPLETE", stack.stack_status_reason
    assert reality.things == {}


async def test_cfn_errors_name_the_cfn_path_and_line(cv: Converge) -> None:
    broken = STACK.replace("{Ref: Name}", "{Ref: Nmae}")
    with pytest.raises(TemplateError) as caught:
        await cv.create_stack("cfn", broken)
    message = str(caught.value)
    assert "<template>:20: Resources.db.Properties.value: Ref: unknown parameter 'Nmae'" in message
    assert "did you mean 'Name'?" in message
