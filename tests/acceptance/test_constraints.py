"""Custom constraints through the public API: checked when a request is accepted."""

from __future__ import annotations

import pytest

from converge.api import Converge
from converge.errors import TemplateError

TEMPLATE = """
heat_template_version: 2021-04-16
parameters:
  until:
    type: string
    constraints: [{custom_constraint: expiration}]
  address:
    type: string
    default: 10.0.0.1
    constraints: [{custom_constraint: ip_addr}]
resources:
  a: {type: OS::Heat::Value, properties: {value: {get_param: address}}}
"""


async def test_an_expired_date_is_refused_and_nothing_is_made(cv: Converge) -> None:
    with pytest.raises(TemplateError, match="Expiration 2001-01-01T00:00:00Z is invalid"):
        await cv.create_stack("s", TEMPLATE, parameters={"until": "2001-01-01T00:00:00Z"})
    assert await cv.list_stacks() == []


async def test_a_bad_address_names_the_parameter(cv: Converge) -> None:
    with pytest.raises(TemplateError) as caught:
        await cv.create_stack(
            "s", TEMPLATE, parameters={"until": "2999-01-01T00:00:00Z", "address": "10.0.0.256"}
        )
    assert "parameters.address" in str(caught.value)
    assert "Invalid IP address" in str(caught.value)


async def test_valid_values_create_the_stack(cv: Converge) -> None:
    stack = await cv.create_stack("s", TEMPLATE, parameters={"until": "2999-01-01T00:00:00Z"})
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    # A later operation prepares the stored template again: still fine.
    stack = await cv.update_stack("s", existing=True, parameters={"address": "10.0.0.2"})
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
