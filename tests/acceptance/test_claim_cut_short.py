"""A claim the database cut short (a dropped connection, a restart) leaves nothing behind
in the process that tried it: the resource's next check goes ahead. Found by the chaos
test's terminated connections, after which a worker skipped a row forever."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from converge.api import Converge
from converge.errors import StoreError
from support.world import Reality

TEMPLATE = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing, properties: {value: one}}
"""


async def test_a_claim_cut_short_by_the_database_does_not_strand_the_resource(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = cv.engine.ctx.store
    update_resource = store.update_resource
    cut: list[int] = []

    async def first_claim_cut(
        resource_id: int, expected_key: int, changes: Mapping[str, Any], **kwargs: Any
    ) -> Any:
        if changes.get("engine_id") and not cut:
            cut.append(resource_id)
            raise StoreError("database error: server closed the connection unexpectedly")
        return await update_resource(resource_id, expected_key, changes, **kwargs)

    monkeypatch.setattr(store, "update_resource", first_claim_cut)
    stack = await asyncio.wait_for(cv.create_stack("s", TEMPLATE), 30)
    assert cut, "the claim was never cut"
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert [p["value"] for p in reality.by_name("a").values()] == ["one"]
