"""Two operations started within milliseconds: the newer wins cleanly, every time, and the
older one's caller is told it was superseded instead of being told it succeeded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from converge.api import Converge
from converge.core.states import Action
from converge.core.traversal import GraphNode
from converge.errors import Conflict, Superseded
from converge.messages import CheckResource
from converge.views import StackView
from support.templates import CHAIN
from support.world import IN_MEMORY_REALITY, Reality, eventually

ROUNDS = 20


async def _update(cv: Converge, v: str) -> StackView | Superseded:
    try:
        # f changes too: a and c are replaced, so rows come and go under the other update
        return await cv.update_stack("r", CHAIN, parameters={"v": v, "f": f"f-{v}"})
    except Superseded as exc:
        return exc


async def test_two_updates_started_together_the_newer_wins_every_time(
    cv: Converge, reality: Reality
) -> None:
    await cv.create_stack("r", CHAIN)
    told = 0
    # Rounds go on past ROUNDS until two updates did overlap (a loaded machine may run
    # every update of the first rounds on its own).
    for round_ in range(ROUNDS * 3):
        if round_ >= ROUNDS and told:
            break
        before = (await cv.list_events("r"))[-1].id
        first = asyncio.create_task(_update(cv, f"first{round_}"))
        await asyncio.sleep(0.002 * (round_ % 4))
        second = asyncio.create_task(_update(cv, f"second{round_}"))
        results = {"first": await first, "second": await second}
        completed = [k for k, r in results.items() if isinstance(r, StackView)]
        superseded = [k for k, r in results.items() if isinstance(r, Superseded)]
        stack = await cv.get_stack("r")
        if stack.stack_status != "UPDATE_COMPLETE":
            events = await cv.list_events("r", after_id=before)
            detail = [
                (e.resource_name, e.resource_status, e.resource_status_reason) for e in events
            ]
            raise AssertionError((round_, stack.stack_status, detail))
        # Which one started its traversal last is the one that won; the other was told.
        winner = stack.parameters["v"]
        assert winner in (f"first{round_}", f"second{round_}")
        winner_key = winner.removesuffix(str(round_))
        assert winner_key in completed, (round_, results)
        for key in superseded:
            assert key != winner_key
            assert "superseded by a newer operation" in str(results[key])
        for key in completed:
            view = results[key]
            assert isinstance(view, StackView)
            assert view.stack_status == "UPDATE_COMPLETE"
        # Told "completed" only when it did: the stack's own record of this round.
        history = [
            e.resource_status
            for e in await cv.list_events("r", after_id=before)
            if e.resource_name == "r" and e.resource_type == "OS::Heat::Stack"
        ]
        assert history.count("UPDATE_IN_PROGRESS") == 2, history
        assert history.count("UPDATE_COMPLETE") == len(completed), (round_, history, results)
        told += len(superseded)
        # Reality is what the newer template says, one thing per resource.
        for name, value in (
            ("a", winner),
            ("b", f"{winner}:{winner}"),
            ("c", f"{winner}:{winner}"),
        ):
            assert [p["value"] for p in reality.by_name(name).values()] == [value], (round_, name)
        rows = await cv.list_resources("r")
        assert sorted(r.resource_name for r in rows) == ["a", "b", "c"], round_
    assert told > 0  # the rounds did overlap


GATED_C = CHAIN.replace(
    "  f: {type: string, default: x}\n",
    "  f: {type: string, default: x}\n  g: {type: string, default: ''}\n",
).replace(
    "value: {get_attr: [b, value]}, fixed: {get_param: f}}}",
    "value: {get_attr: [b, value]}, fixed: {get_param: f}, gate: {get_param: g}}}",
)


async def test_a_replacement_the_superseded_update_made_is_not_left_behind(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The older update decides to replace c; the newer one starts before that replacement
    exists (its graph does not know it), then finds it made and replaces it again. The one
    in between must go within the newer update, and c must be made once for it."""
    await cv.create_stack("r", GATED_C)
    store = cv.engine.ctx.store
    add_replacement = store.add_replacement
    deciding, decided = asyncio.Event(), asyncio.Event()

    async def held_for_c(old, new, old_changes):  # type: ignore[no-untyped-def]
        if old.name == "c" and not decided.is_set():
            deciding.set()
            await decided.wait()
        return await add_replacement(old, new, old_changes)

    monkeypatch.setattr(store, "add_replacement", held_for_c)
    older = asyncio.create_task(_update_with(cv, {"v": "first", "f": "f-first", "g": "first-gate"}))
    await asyncio.wait_for(deciding.wait(), 10)
    newer = asyncio.create_task(_update_with(cv, {"v": "second", "f": "f-second"}))
    await eventually(lambda: _parameter_is(cv, "r", "v", "second"))
    decided.set()  # the older update makes c's replacement now: unknown to the newer graph
    await eventually(lambda: _has_gate(reality, "first-gate"))
    reality.gates["first-gate"].set()  # ... and creates it, while the newer one waits for it
    assert isinstance(await older, Superseded)
    stack = await newer
    assert isinstance(stack, StackView) and stack.stack_status == "UPDATE_COMPLETE"
    for name, value in (("a", "second"), ("b", "second:second"), ("c", "second:second")):
        assert [p["value"] for p in reality.by_name(name).values()] == [value], name
    assert len(reality.actions("create", "c")) == 3  # the original, the older's, the newer's
    rows = await cv.list_resources("r")
    assert sorted(r.resource_name for r in rows) == ["a", "b", "c"]


async def _update_with(cv: Converge, parameters: dict[str, str]) -> StackView | Superseded:
    try:
        return await cv.update_stack("r", GATED_C, parameters=parameters)
    except Superseded as exc:
        return exc


async def _parameter_is(cv: Converge, stack: str, name: str, value: str) -> bool:
    return (await cv.get_stack(stack)).parameters.get(name) == value


async def _has_gate(reality: Reality, gate: str) -> bool:
    return gate in reality.gates


async def test_a_create_superseded_by_an_update_is_told_so(cv: Converge, reality: Reality) -> None:
    gated = CHAIN.replace(
        "fixed: {get_param: f}}}\n  b", "fixed: {get_param: f}, gate: {get_param: v}}}\n  b"
    )
    create = asyncio.create_task(cv.create_stack("r", gated, parameters={"v": "slow"}))
    while not reality.gates:  # a's create has begun and waits at its gate
        await asyncio.sleep(0.01)
    update = asyncio.create_task(cv.update_stack("r", gated, parameters={"v": "", "f": "y"}))
    await eventually(lambda: _state_is(cv, "r", "UPDATE_IN_PROGRESS"))
    reality.gates["slow"].set()
    with pytest.raises(Superseded, match="the create of stack r was superseded by a newer"):
        await create
    stack = await update
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    assert [p["fixed"] for p in reality.by_name("a").values()] == ["y"]


async def test_update_of_a_stack_still_being_created_is_a_clear_conflict(cv: Converge) -> None:
    # A stack without a template: stacks are now stored with their template in one
    # transaction, so only a state from an older converge whose create stopped in between.
    record = await cv.engine.ctx.store.create_stack(
        "r",
        cv.project_id,
        action=Action.CREATE,
        disable_rollback=False,
        timeout_mins=None,
        drift_policy="notify",
    )
    with pytest.raises(Conflict, match=r"stack r has no template .*`converge destroy` it"):
        await cv.update_stack(record.id, CHAIN)


@pytest.mark.embedded_only(IN_MEMORY_REALITY)
async def test_two_creates_of_one_name_one_wins_the_other_is_told(cv: Converge) -> None:
    results = await asyncio.gather(
        cv.create_stack("r", CHAIN), cv.create_stack("r", CHAIN), return_exceptions=True
    )
    views = [r for r in results if isinstance(r, StackView)]
    errors = [r for r in results if isinstance(r, BaseException)]
    assert len(views) == 1 and views[0].stack_status == "CREATE_COMPLETE"
    assert len(errors) == 1 and isinstance(errors[0], Conflict), errors
    assert "already exists" in str(errors[0])


async def _state_is(cv: Converge, stack: str, state: str) -> bool:
    return (await cv.get_stack(stack)).stack_status == state


GATED_A = CHAIN.replace(
    "  f: {type: string, default: x}\n",
    "  f: {type: string, default: x}\n  g: {type: string, default: ''}\n",
).replace(
    "a: {type: Test::Thing, properties: {value: {get_param: v}, fixed: {get_param: f}}}",
    "a: {type: Test::Thing, properties: {value: {get_param: v}, fixed: {get_param: f}, "
    "gate: {get_param: g}}}",
)


async def test_a_replacement_of_a_row_the_newest_update_dropped_is_not_left_behind(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three updates replace a. The first makes a replacement (R1); the second, started
    before R1 was acted on, converges the original again and decides to replace it too; the
    third starts while R1 is being created, so it converges R1. Only then does the second
    make its replacement of the original (R2), unknown to the third. The third deletes the
    original with R2, which stands for nothing it converges."""
    await cv.create_stack("r", GATED_A)
    store = cv.engine.ctx.store
    add_replacement = store.add_replacement
    first_made, first_goes = asyncio.Event(), asyncio.Event()
    second_deciding, second_goes = asyncio.Event(), asyncio.Event()
    made: list[str] = []
    r1: list[int] = []

    async def held_for_a(old, new, old_changes):  # type: ignore[no-untyped-def]
        if old.name != "a" or len(made) >= 2:
            return await add_replacement(old, new, old_changes)
        if not made:
            made.append("first")
            result = await add_replacement(old, new, old_changes)
            assert result is not None
            r1.append(result[1].id)
            first_made.set()
            await first_goes.wait()  # R1 is made and not yet acted on
            return result
        made.append("second")
        second_deciding.set()
        await second_goes.wait()
        return await add_replacement(old, new, old_changes)

    monkeypatch.setattr(store, "add_replacement", held_for_a)
    # The second update's cleanup of R1 (a leaf of its graph) waits until the first update
    # has claimed R1; then it leaves R1 to that one.
    load_for_check = store.load_for_check
    r1_claimed = asyncio.Event()

    async def r1_cleanup_waits(stack_id, node, traversal_id, **kwargs):  # type: ignore[no-untyped-def]
        if r1 and node == GraphNode(r1[0], False):
            await r1_claimed.wait()
        return await load_for_check(stack_id, node, traversal_id, **kwargs)

    monkeypatch.setattr(store, "load_for_check", r1_cleanup_waits)

    def update(v: str, g: str = "") -> asyncio.Task[StackView | Superseded]:
        return asyncio.create_task(_update_with_a(cv, {"v": v, "f": f"f-{v}", "g": g}))

    first = update("first", g="first-gate")
    await asyncio.wait_for(first_made.wait(), 10)
    second = update("mid")
    await asyncio.wait_for(second_deciding.wait(), 10)  # it converges the original
    first_goes.set()  # the first update creates R1 now: it waits at its gate
    await eventually(lambda: _has_gate(reality, "first-gate"))
    r1_claimed.set()
    third = update("second")
    await eventually(lambda: _parameter_is(cv, "r", "v", "second"))
    second_goes.set()  # R2, a replacement of the original, unknown to the third update
    await eventually(lambda: _created(reality, "a", 2))  # R1 is still at its gate
    reality.gates["first-gate"].set()
    assert isinstance(await first, Superseded)
    assert isinstance(await second, Superseded)
    stack = await third
    assert isinstance(stack, StackView) and stack.stack_status == "UPDATE_COMPLETE"
    for name, value in (("a", "second"), ("b", "second:second"), ("c", "second:second")):
        assert [p["value"] for p in reality.by_name(name).values()] == [value], name
    # The original, R1, R2 and the third update's replacement of R1.
    assert len(reality.actions("create", "a")) == 4
    rows = await cv.list_resources("r")
    assert sorted(r.resource_name for r in rows) == ["a", "b", "c"]


async def _update_with_a(cv: Converge, parameters: dict[str, str]) -> StackView | Superseded:
    try:
        return await cv.update_stack("r", GATED_A, parameters=parameters)
    except Superseded as exc:
        return exc


async def _created(reality: Reality, name: str, count: int) -> bool:
    return len(reality.actions("create", name)) >= count


async def test_a_newer_update_waiting_on_a_replacement_of_its_row_is_handed_the_row(
    cv: Converge, reality: Reality, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The middle of three updates converges a's original row but ends on a replacement of
    a replacement (the oldest update made the first, R1, after the middle one's graph was
    built; the middle one replaces R1 with R2). The newest update's graph knows R1 as a's
    row; its check finds R2 busy and leaves a to the middle update's finish. That finish
    handed on only its node's row and R2, not R1: the newest update waited for the sweeper."""
    await cv.create_stack("r", GATED_A)
    store = cv.engine.ctx.store
    stack_id = (await cv.get_stack("r")).id
    (original,) = [row for row in await store.list_resources(stack_id) if row.name == "a"]
    add_replacement, load_for_check = store.add_replacement, store.load_for_check
    oldest_replaces, middle_replaces = asyncio.Event(), asyncio.Event()
    middle_checks_a, newest_checks_r1 = asyncio.Event(), asyncio.Event()
    made: list[int] = []  # R1, R2
    loads_of_a: list[str] = []

    async def held_replacement(old, new, old_changes):  # type: ignore[no-untyped-def]
        if old.name == "a" and len(made) == 0:
            await oldest_replaces.wait()  # until the middle update's graph is built
        elif old.name == "a" and len(made) == 1:
            await middle_replaces.wait()  # until the newest update's graph is built
        result = await add_replacement(old, new, old_changes)
        if result is not None and old.name == "a":
            made.append(result[1].id)
        return result

    async def held_load(stack_id, node, traversal_id, **kwargs):  # type: ignore[no-untyped-def]
        if node == GraphNode(original.id, True):
            loads_of_a.append(traversal_id)
            if len(set(loads_of_a)) > 1:  # the middle update's check of a
                await middle_checks_a.wait()
        elif made and node == GraphNode(made[0], True):  # only the newest graph knows R1
            await newest_checks_r1.wait()
        return await load_for_check(stack_id, node, traversal_id, **kwargs)

    monkeypatch.setattr(store, "add_replacement", held_replacement)
    monkeypatch.setattr(store, "load_for_check", held_load)
    check, r1_checked = cv.engine.worker.check, asyncio.Event()

    async def recorded(message: CheckResource, inputs: Any = None) -> None:
        await check(message, inputs)
        if made and (message.resource_id, message.is_update) == (made[0], True):
            r1_checked.set()

    monkeypatch.setattr(cv.engine.worker, "check", recorded)
    # Only the hand-over may carry a on: the sweeper re-sends nothing in this test.
    monkeypatch.setattr(cv.engine, "_resend_ready", _nothing_resent)

    def update(v: str, g: str = "") -> asyncio.Task[StackView | Superseded]:
        return asyncio.create_task(_update_with_a(cv, {"v": v, "f": f"f-{v}", "g": g}))

    oldest = update("first")
    await eventually(lambda: _loaded(loads_of_a, 1))
    middle = update("mid", g="mid-gate")
    await eventually(lambda: _parameter_is(cv, "r", "v", "mid"))
    oldest_replaces.set()  # R1, made and created by the oldest update
    await eventually(lambda: _created(reality, "a", 2))
    middle_checks_a.set()  # it replaces R1: held before R2 is made
    await eventually(lambda: _made(made, 1))
    newest = update("second")
    await eventually(lambda: _parameter_is(cv, "r", "v", "second"))
    middle_replaces.set()  # R2, created by the middle update: it waits at its gate
    await eventually(lambda: _has_gate(reality, "mid-gate"))
    newest_checks_r1.set()  # finds R2 busy: the middle update's finish hands a on
    await asyncio.wait_for(r1_checked.wait(), 10)
    reality.gates["mid-gate"].set()
    # Without the hand-over the newest update never settles, nor do the others' waits.
    stack = await asyncio.wait_for(newest, 10)
    assert isinstance(await oldest, Superseded)
    assert isinstance(await middle, Superseded)
    assert isinstance(stack, StackView) and stack.stack_status == "UPDATE_COMPLETE"
    for name, value in (("a", "second"), ("b", "second:second"), ("c", "second:second")):
        assert [p["value"] for p in reality.by_name(name).values()] == [value], name


async def _nothing_resent(*_args: object) -> bool:
    return False


async def _loaded(loads: list[str], count: int) -> bool:
    return len(loads) >= count


async def _made(made: list[int], count: int) -> bool:
    return len(made) >= count
