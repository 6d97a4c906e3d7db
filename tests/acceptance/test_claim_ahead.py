"""Claiming ahead (``engine/worker/claim_ahead.py``): on PostgreSQL the finish of a chain's
link claims the next link's create in its own transaction, and the continued check acts
at once; every create is still claimed before it acts, made once, and announced by its
events as before. A claim lost to a change of the row, or whose check cannot run, leaves
the link to the usual path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from converge.api import Converge
from converge.engine.runtime import Engine
from converge.messages import CheckResource
from converge.records import CheckInputs, FinishedNode, ResourceRecord
from converge.resources.registry import PluginRegistry
from support.continuation import CountingBus, names, running
from support.world import Reality, eventually, paused_at

CHAIN = """
heat_template_version: 2021-04-16
resources:
  a: {type: Test::Thing}
  b: {type: Test::Thing, depends_on: a}
  c: {type: Test::Thing, depends_on: b}
  d: {type: Test::Thing, depends_on: c}
  e: {type: Test::Thing, depends_on: d}
"""

HOOK_C = "resource_registry:\n  resources:\n    c:\n      hooks: pre-create\n"


async def _events(engine: Engine, stack_id: str) -> list[tuple[str, str, str]]:
    found = await engine.ctx.store.list_events(stack_id)
    return [(e.resource_name, e.action, e.status) for e in found]


async def test_a_chain_claims_each_next_create_with_the_finish_before_it(
    database_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    """a comes through the bus; its finish reads b (continued) and c's row; from b's
    finish on, each finish claims the next link: c, d and e. SQLite never does (its
    commits are cheap): every check claims for itself."""
    bus = CountingBus()
    async with running(database_url, registry, bus) as engine:
        stack = await Converge(engine).create_stack("chain", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert names(reality) == ["a", "b", "c", "d", "e"]  # each made once, in order
        postgresql = database_url.startswith("postgresql")
        assert engine.worker.claims_ahead == (3 if postgresql else 0)
        assert engine.continued_checks == 4
        events = await _events(engine, stack.id)
        for name in "abcde":  # claimed (IN_PROGRESS) before it completed, as always
            mine = [(action, status) for n, action, status in events if n == name]
            assert mine == [("CREATE", "IN_PROGRESS"), ("CREATE", "COMPLETE")]
        rows = await engine.ctx.store.list_resources(stack.id)
        assert {(row.action, row.status, row.engine_id) for row in rows} == {
            ("CREATE", "COMPLETE", None)
        }
        by_name = {row.name: row for row in rows}
        # The intent stored with the claim: what a create interrupted would be found by.
        assert by_name["d"].requires == frozenset({by_name["c"].id})
        assert not engine.worker._active and not engine.worker._claimed_ahead
        assert not engine.worker._ahead_rows
        assert engine.sweeper_rescues == 0


@pytest.mark.timeout(60)
async def test_a_row_changed_after_it_was_read_ahead_is_not_claimed_with_the_finish(
    postgres_url: str,
    registry: PluginRegistry,
    reality: Reality,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """c's row, read with a's finish, changes before b's finish: that finish's claim of c
    loses its compare-and-swap (nothing of it is written) and c's check decides and
    claims as usual, from the row as it is now."""
    bus = CountingBus()
    async with running(postgres_url, registry, bus, sweep_interval=0.05) as engine:
        store = engine.ctx.store
        real_finish, real_update = store.finish_node, store.update_resource
        touched: list[ResourceRecord] = []
        claimed: list[ResourceRecord | None] = []

        async def finish_then_touch(*args: Any, **kwargs: Any) -> FinishedNode:
            if kwargs.get("claim_next") is not None:
                claim = kwargs["claim_next"]
                row = await store.get_resource(claim.resource_id)
                assert row is not None and row.atomic_key == claim.expected_key
                if not touched:
                    touched.append(row)
                    assert await real_update(row.id, row.atomic_key, {"status_reason": "x"})
            finished = await real_finish(*args, **kwargs)
            if kwargs.get("claim_next") is not None:
                claimed.append(finished.claimed_next)
            return finished

        monkeypatch.setattr(store, "finish_node", finish_then_touch)
        stack = await Converge(engine).create_stack("stale", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE"
        assert names(reality) == ["a", "b", "c", "d", "e"]
        (c,) = touched
        assert c.name == "c"
        assert claimed[0] is None  # lost: the row had changed
        assert [row.name for row in claimed[1:] if row is not None] == ["d", "e"]
        assert engine.worker.claims_ahead == 2
        events = await _events(engine, stack.id)
        assert [(a, s) for n, a, s in events if n == "c"] == [
            ("CREATE", "IN_PROGRESS"),
            ("CREATE", "COMPLETE"),
        ]
        assert not engine.worker._active and not engine.worker._claimed_ahead
        assert engine.sweeper_rescues == 0


async def test_a_hooked_link_is_left_to_its_check(
    postgres_url: str, registry: PluginRegistry, reality: Reality
) -> None:
    """Only a plain create is claimed ahead: c waits on its pre-create hook, so b's finish
    does not claim it (c's check pauses it); once the hook is cleared, c goes on, and
    d's finish claims e."""
    bus = CountingBus()
    async with running(postgres_url, registry, bus) as engine:
        cv = Converge(engine)
        await cv.create_stack("hooked", CHAIN, environments=[HOOK_C], wait=False)
        await eventually(lambda: paused_at(cv, "hooked", "c", "pre-create"))
        assert engine.worker.claims_ahead == 0
        assert names(reality) == ["a", "b"]
        await cv.clear_hook("hooked", "c", "pre-create")
        done = await cv.wait("hooked")
        assert done.stack_status == "CREATE_COMPLETE"
        assert names(reality) == ["a", "b", "c", "d", "e"]
        assert engine.worker.claims_ahead == 1
        assert not engine.worker._active and not engine.worker._claimed_ahead


@pytest.mark.timeout(60)
async def test_a_claimed_link_not_continued_here_is_given_back(
    postgres_url: str,
    registry: PluginRegistry,
    reality: Reality,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """d is claimed with c's finish, but this process does not take d's check (as when it
    is stopping): d goes through the bus, the claim is given back (the row as it was read)
    and d handed on again; d is made once."""
    bus = CountingBus()
    async with running(postgres_url, registry, bus) as engine:
        continue_here = engine.ctx.check_here
        assert continue_here is not None
        offered: list[int] = []

        def refuses_the_third(message: CheckResource, inputs: CheckInputs | None = None) -> bool:
            offered.append(message.resource_id)
            return len(offered) != 3 and continue_here(message, inputs)

        engine.ctx.check_here = refuses_the_third
        real_update = engine.ctx.store.update_resource
        given_back: list[int] = []

        async def update(resource_id: int, key: int, changes: Mapping[str, Any], **kw: Any) -> Any:
            if changes.get("action") == "INIT":
                given_back.append(resource_id)
            return await real_update(resource_id, key, changes, **kw)

        monkeypatch.setattr(engine.ctx.store, "update_resource", update)
        stack = await Converge(engine).create_stack("refused", CHAIN)
        assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
        assert names(reality) == ["a", "b", "c", "d", "e"]
        rows = {row.name: row for row in await engine.ctx.store.list_resources(stack.id)}
        assert offered[2] == rows["d"].id
        assert given_back == [rows["d"].id]
        assert engine.worker.claims_ahead >= 1
        assert {(row.status, row.engine_id) for row in rows.values()} == {("COMPLETE", None)}
        assert not engine.worker._active and not engine.worker._claimed_ahead
        assert engine.sweeper_rescues == 0


async def test_a_claim_whose_traversal_is_gone_is_given_back(
    postgres_url: str,
    registry: PluginRegistry,
    reality: Reality,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The continued check of a claimed link finds its traversal's graph gone (a newer
    traversal started in between): it does not act, it puts the row back as it was and
    hands it to the current traversal, which then converges it."""
    bus = CountingBus()
    async with running(postgres_url, registry, bus, sweep_interval=0.05) as engine:
        real_graph, real_act = engine.ctx.graph, engine.worker._act_claimed_ahead
        real_update = engine.ctx.store.update_resource
        gone: list[int] = []
        given_back: list[Mapping[str, Any]] = []

        async def act(message: CheckResource, plan: Any) -> None:
            if not gone:
                gone.append(message.resource_id)
            await real_act(message, plan)

        async def graph(stack_id: str, traversal_id: str) -> Any:
            if gone and len(gone) == 1:
                gone.append(-1)  # once, for the first claimed check
                return None
            return await real_graph(stack_id, traversal_id)

        async def update(resource_id: int, key: int, changes: Mapping[str, Any], **kw: Any) -> Any:
            if changes.get("action") == "INIT":
                given_back.append(changes)
            return await real_update(resource_id, key, changes, **kw)

        monkeypatch.setattr(engine.worker, "_act_claimed_ahead", act)
        monkeypatch.setattr(engine.ctx, "graph", graph)
        monkeypatch.setattr(engine.ctx.store, "update_resource", update)
        stack = await Converge(engine).create_stack("gone", CHAIN)
        assert len(gone) == 2
        # Given back: the row was released and re-sent, then converged by its own check.
        assert [(c["engine_id"], c["status"]) for c in given_back] == [(None, "COMPLETE")]
        assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
        assert names(reality) == ["a", "b", "c", "d", "e"]
        rows = await engine.ctx.store.list_resources(stack.id)
        assert {(row.status, row.engine_id) for row in rows} == {("COMPLETE", None)}
        assert not engine.worker._active and not engine.worker._claimed_ahead
