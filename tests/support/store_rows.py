"""Stacks, with resource rows or without, as the store contract tests start from."""

from __future__ import annotations

from collections.abc import Sequence

from converge.core.states import Action, Status
from converge.ports import Store
from converge.records import NewResource, ResourceRecord


async def new_stack(store: Store, name: str = "s") -> str:
    """A new stack named ``name`` in project p, with no template; its id."""
    stack = await store.create_stack(
        name,
        "p",
        action=Action.CREATE,
        disable_rollback=False,
        timeout_mins=None,
        drift_policy="notify",
    )
    return stack.id


async def stack_with_rows(
    store: Store,
    new: Sequence[NewResource],
    *,
    name: str = "s",
    traversal: str = "t",
    in_progress: bool = False,
) -> tuple[str, list[ResourceRecord]]:
    """A new stack with rows ``new``, pointed at ``traversal`` (and IN_PROGRESS when
    asked); its id and its rows in the order of their ids."""
    stack = await store.get_stack(await new_stack(store, name))
    changes: dict[str, object] = {"current_traversal": traversal}
    if in_progress:
        changes["status"] = Status.IN_PROGRESS
    started = await store.start_traversal(stack.id, stack.atomic_key, new, lambda _: (changes, {}))
    assert started is not None
    rows = await store.list_resources(stack.id)
    return stack.id, sorted(rows, key=lambda row: row.id)


def named(count: int) -> list[NewResource]:
    """``count`` new rows of type T: r0, r1, …"""
    return [NewResource(f"r{i}", "T") for i in range(count)]
