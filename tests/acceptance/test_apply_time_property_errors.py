"""A property refused only at apply time (its value waited for another resource) fails the
resource and settles the stack, on create and on update, instead of being retried forever
(a settled row cannot fail without starting)."""

from __future__ import annotations

import asyncio
from typing import Any

from converge.api import Converge


def template(length: Any) -> dict[str, Any]:
    return {
        "heat_template_version": "2021-04-16",
        "parameters": {"length": {"type": "string", "default": "8"}},
        "resources": {
            "blank": {"type": "OS::Heat::Value", "properties": {"value": ""}},
            "random": {
                "type": "OS::Heat::RandomString",
                "properties": {
                    "length": {
                        "list_join": [
                            "",
                            [{"get_param": "length"}, {"get_attr": ["blank", "value"]}],
                        ]
                    }
                },
            },
        },
    }


async def test_on_create(cv: Converge) -> None:
    created = await asyncio.wait_for(
        cv.create_stack("bad", template(8), parameters={"length": "eight"}, disable_rollback=True),
        timeout=60,
    )
    assert created.stack_status == "CREATE_FAILED"
    assert "properties.length: expected an integer, got 'eight'" in created.stack_status_reason
    [row] = [r for r in await cv.list_resources("bad") if r.resource_name == "random"]
    assert row.resource_status == "CREATE_FAILED"


async def test_on_update(cv: Converge) -> None:
    created = await cv.create_stack("bad", template(8))
    assert created.stack_status == "CREATE_COMPLETE", created.stack_status_reason
    updated = await asyncio.wait_for(
        cv.update_stack("bad", existing=True, parameters={"length": "x"}, disable_rollback=True),
        timeout=60,
    )
    assert updated.stack_status == "UPDATE_FAILED"
    assert "expected an integer, got 'x'" in updated.stack_status_reason
