"""Templates several acceptance modules converge: ``Test::Thing`` resources where ``value``
updates in place and ``fixed`` forces a replacement (see ``support.world``)."""

# a, and b that reads a: changing f replaces a.
PAIR = """
heat_template_version: 2021-04-16
parameters:
  v: {type: string, default: one}
  f: {type: string, default: x}
resources:
  a: {type: Test::Thing, properties: {value: {get_param: v}, fixed: {get_param: f}}}
  b: {type: Test::Thing, properties: {value: {list_join: [':', [{get_attr: [a, value]}, {get_param: v}]]}}}
"""

# PAIR and c, which reads b: changing f replaces a and c.
CHAIN = (
    PAIR
    + "  c: {type: Test::Thing, properties: {value: {get_attr: [b, value]}, fixed: {get_param: f}}}\n"
)

# a, and b that reads a and fails when fail_b: changing a_fixed replaces a.
FAILING_PAIR = """
heat_template_version: 2021-04-16
parameters:
  fail_b: {type: boolean, default: false}
  a_fixed: {type: string, default: one}
  b_value: {type: string, default: one}
resources:
  a:
    type: Test::Thing
    properties: {fixed: {get_param: a_fixed}, value: a}
  b:
    type: Test::Thing
    properties:
      value: {list_join: ['/', [{get_attr: [a, id]}, {get_param: b_value}]]}
      fail: {get_param: fail_b}
"""
