"""Environment files merged by Heat's parameter_merge_strategies, through the public API."""

from __future__ import annotations

from converge.api import Converge, Source
from support.world import Reality

TEMPLATE = """
heat_template_version: 2021-04-16
parameters:
  hosts: {type: comma_delimited_list}
  ports: {type: json}
resources:
  balancer:
    type: Test::Thing
    properties:
      value:
        list_join:
          - ' '
          - - {list_join: [',', {get_param: hosts}]}
            - {get_param: [ports, db]}
            - {get_param: [ports, web]}
"""
BASE = """
parameter_merge_strategies:
  hosts: merge
  ports: deep_merge
parameters:
  hosts: a,b
  ports: {db: '5432'}
"""
SITE = """
parameters:
  hosts: [c]
  ports: {web: '8080'}
"""


async def test_merge_strategies_combine_the_environment_files(
    cv: Converge, reality: Reality
) -> None:
    environments = [Source(BASE, "base.yaml"), Source(SITE, "site.yaml")]
    stack = await cv.create_stack("lb", TEMPLATE, environments=environments)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    (balancer,) = reality.by_name("balancer").values()
    assert balancer["value"] == "a,b,c 5432 8080"

    # a PATCH update prepares the stored environment again: the same merged values
    stack = await cv.update_stack("lb", existing=True)
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert reality.actions("update") == []
    assert [props["value"] for props in reality.by_name("balancer").values()] == ["a,b,c 5432 8080"]
