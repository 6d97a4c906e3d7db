"""The entity baseline contract, on SQLite and PostgreSQL: CAS, sequence, snapshot consistency."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from converge.adapters.sql.entities import EntityStore
from converge.adapters.sql.store import SqlStore
from converge.core.baseline import Observation, Owner, observation
from converge.core.states import Action, Status
from converge.messages import ChangeKind, ChangeNotification
from converge.records import NewResource

T = "T::Thing"


@pytest.fixture
async def stores(database_url: str) -> AsyncIterator[tuple[SqlStore, SqlStore]]:
    """Two stores over one database: two engine processes, as far as the baseline knows."""
    first = SqlStore.open(database_url)
    second = SqlStore.open(database_url)
    try:
        yield first, second
    finally:
        await first.close()
        await second.close()


def seen(**essences: int) -> dict[str, Observation]:
    return {pid: observation({"v": v}, None) for pid, v in essences.items()}


async def test_reconcile_numbers_changes_and_snapshots_them(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    entities = EntityStore(stores[0])
    notes = await entities.reconcile(T, seen(a=1, b=1), complete=True, observed_at=1, now=1)
    assert [(n.physical_id, n.kind, n.seq) for n in notes] == [
        ("a", ChangeKind.APPEARED, 1),
        ("b", ChangeKind.APPEARED, 2),
    ]
    assert await entities.reconcile(T, seen(a=1, b=1), complete=True, observed_at=2, now=2) == []
    # partial: b is not mentioned, so it is not gone
    notes = await entities.reconcile(T, seen(a=2), complete=False, observed_at=3, now=3)
    assert [(n.physical_id, n.kind, n.seq) for n in notes] == [("a", ChangeKind.CHANGED, 3)]
    # complete, but observing b failed: unknown is not gone
    assert (
        await entities.reconcile(T, seen(a=2), complete=True, unknown=["b"], observed_at=4, now=4)
        == []
    )
    notes = await entities.reconcile(T, seen(a=2), complete=True, observed_at=5, now=5)
    assert [(n.physical_id, n.kind, n.seq) for n in notes] == [("b", ChangeKind.GONE, 4)]
    snapshot = await entities.snapshot(T)
    assert snapshot.seqs == {T: 4} and await entities.sequence(T) == 4
    [only] = snapshot.entities
    assert (only.physical_id, only.essence, only.seq, only.last_seen) == ("a", {"v": 2}, 3, 5)
    assert (await entities.snapshot("T::Other")).entities == []
    everything = await entities.snapshot(None)
    assert everything.seq_of(T) == 4 and everything.seq_of("T::Other") == 0


async def test_an_older_observation_never_overwrites_a_newer_one(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    entities = EntityStore(stores[0])
    await entities.reconcile(T, seen(a=1), complete=True, observed_at=10, now=10)
    await entities.reconcile(T, seen(a=2), complete=True, observed_at=20, now=20)
    # a slow sampler that read reality at 15 reports the value of then: dropped
    assert await entities.reconcile(T, seen(a=1), complete=True, observed_at=15, now=21) == []
    assert (await entities.snapshot(T)).entities[0].essence == {"v": 2}


async def test_concurrent_samplers_of_one_type_win_each_change_once(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    first, second = EntityStore(stores[0]), EntityStore(stores[1])
    published: list[ChangeNotification] = []
    for round_ in range(1, 8):
        observed = seen(**{f"e{i}": round_ // 2 for i in range(round_)})
        results = await asyncio.gather(
            *(
                store.reconcile(T, observed, complete=True, observed_at=round_, now=round_)
                for store in (first, second, first, second)
            )
        )
        published.extend(n for result in results for n in result)
    seqs = [n.seq for n in published]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))  # one number per change, no gap
    changes = {(n.physical_id, n.hash) for n in published}
    assert len(changes) == len(published)  # nobody published a change twice


async def test_every_snapshot_is_exactly_the_changes_up_to_its_sequence(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    """Snapshots read while two writers change the type: replaying the notifications up to
    the snapshot's sequence gives exactly the snapshot."""
    writers = [EntityStore(stores[0]), EntityStore(stores[1])]
    reader = EntityStore(stores[0])
    rng = random.Random(7)
    published: list[ChangeNotification] = []
    snapshots = []

    async def write(writer: EntityStore, step: int) -> None:
        world = {f"e{i}": rng.randrange(3) for i in rng.sample(range(10), rng.randrange(1, 8))}
        published.extend(
            await writer.reconcile(T, seen(**world), complete=True, observed_at=step, now=step)
        )

    async def read() -> None:
        snapshots.append(await reader.snapshot(T))

    for step in range(15):
        await asyncio.gather(write(writers[0], step), read(), write(writers[1], step), read())
    by_seq = {n.seq: n for n in published}
    assert sorted(by_seq) == list(range(1, len(published) + 1))
    for snapshot in snapshots:
        state: dict[str, str] = {}
        for seq in range(1, snapshot.seq_of(T) + 1):
            n = by_seq[seq]
            if n.kind == ChangeKind.GONE:
                del state[n.physical_id]
            else:
                assert n.hash is not None
                state[n.physical_id] = n.hash
        assert state == {e.physical_id: e.hash for e in snapshot.entities}


async def test_managed_entities_are_live_resources_with_a_physical_id(
    stores: tuple[SqlStore, SqlStore],
) -> None:
    store = stores[0]
    stack = await store.create_stack(
        "s",
        "p",
        action=Action.CREATE,
        disable_rollback=True,
        timeout_mins=None,
        drift_policy="notify",
    )
    await store.start_traversal(
        stack.id,
        stack.atomic_key,
        [NewResource("made", T), NewResource("planned", T), NewResource("deleted", T)],
        lambda rows: ({"current_traversal": "t"}, {}),
    )
    rows = {row.name: row for row in await store.list_resources(stack.id)}
    for name, action in (("made", Action.CREATE), ("deleted", Action.DELETE)):
        row = rows[name]
        changes = {
            "physical_resource_id": f"{name}-1",
            "action": action,
            "status": Status.COMPLETE,
            "properties_data": {"v": 1},
        }
        assert await store.update_resource(row.id, row.atomic_key, changes) is not None
    entities = EntityStore(store)
    [managed] = await entities.managed([T])
    assert managed.physical_id == "made-1"
    assert managed.owner == Owner(stack.id, rows["made"].id, "made")
    assert (managed.stack_name, managed.properties) == ("s", {"v": 1})
    assert await entities.managed(["T::Other"]) == []
    notes = await entities.reconcile(
        T, {"made-1": observation({"v": 1}, managed.owner)}, complete=True, observed_at=1, now=1
    )
    assert (notes[0].stack_id, notes[0].resource_id, notes[0].resource_name) == (
        stack.id,
        rows["made"].id,
        "made",
    )
    await store.mark_stack_deleted(stack.id)
    assert await entities.managed(None) == []
