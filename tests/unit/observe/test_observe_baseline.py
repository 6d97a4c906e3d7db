"""The pure baseline: stable hashes, the comparison, and the change notification message."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge.core.baseline import (
    BaselineEntry,
    Owner,
    Snapshot,
    compare,
    essence_hash,
    observation,
)
from converge.messages import ChangeKind, ChangeNotification, MessageError

OWNER = Owner("stack-1", 7, "web")


def test_hash_is_stable_across_key_order_and_sensitive_to_values() -> None:
    one = essence_hash({"a": 1, "b": {"x": [1, 2], "y": None}})
    assert one == essence_hash({"b": {"y": None, "x": [1, 2]}, "a": 1})
    assert len(one) == 64
    assert one != essence_hash({"a": 1, "b": {"x": [2, 1], "y": None}})
    assert one != essence_hash({"a": "1", "b": {"x": [1, 2], "y": None}})
    # values JSON cannot hold still hash stably
    assert essence_hash({"s": {3, 1, 2}}) == essence_hash({"s": {2, 3, 1}})
    assert essence_hash({"b": b"\x00\x01"}) == essence_hash({"b": b"\x00\x01"})


def entry(essence: dict[str, Any], owner: Owner | None = None) -> BaselineEntry:
    return BaselineEntry(
        essence_hash(essence),
        owner.stack_id if owner else None,
        owner.resource_id if owner else None,
        owner.resource_name if owner else None,
    )


def test_compare_finds_appeared_changed_and_gone() -> None:
    baseline = {"same": entry({"v": 1}), "edited": entry({"v": 1}), "removed": entry({"v": 1})}
    observed = {
        "same": observation({"v": 1}, None),
        "edited": observation({"v": 2}, None),
        "new": observation({"v": 3}, None),
    }
    changes = {c.physical_id: c for c in compare(baseline, observed, complete=True)}
    assert {pid: c.kind for pid, c in changes.items()} == {
        "edited": ChangeKind.CHANGED,
        "new": ChangeKind.APPEARED,
        "removed": ChangeKind.GONE,
    }
    assert changes["edited"].expected == baseline["edited"]
    assert changes["new"].expected is None
    assert changes["removed"].observation is None


def test_partial_observation_infers_nothing_gone_unless_told() -> None:
    baseline = {"a": entry({"v": 1}), "b": entry({"v": 1})}
    assert compare(baseline, {"a": observation({"v": 1}, None)}, complete=False) == []
    changes = compare(baseline, {}, complete=False, gone=["b", "unknown-to-baseline"])
    assert [(c.physical_id, c.kind) for c in changes] == [("b", ChangeKind.GONE)]


def test_an_owner_change_is_a_change() -> None:
    baseline = {"a": entry({"v": 1})}
    changes = compare(baseline, {"a": observation({"v": 1}, OWNER)}, complete=True)
    assert [c.kind for c in changes] == [ChangeKind.CHANGED]
    managed = {"a": entry({"v": 1}, OWNER)}
    assert compare(managed, {"a": observation({"v": 1}, OWNER)}, complete=True) == []


essences = st.dictionaries(st.sampled_from("abc"), st.integers(0, 2), max_size=2)
worlds = st.dictionaries(st.sampled_from([f"e{i}" for i in range(8)]), essences, max_size=8)


@given(before=worlds, after=worlds)
def test_applying_the_changes_to_the_baseline_gives_the_observation(
    before: dict[str, dict[str, int]], after: dict[str, dict[str, int]]
) -> None:
    baseline = {pid: entry(essence) for pid, essence in before.items()}
    observed = {pid: observation(essence, None) for pid, essence in after.items()}
    changes = compare(baseline, observed, complete=True)
    assert len({c.physical_id for c in changes}) == len(changes)  # one change per entity
    state = {pid: e.hash for pid, e in baseline.items()}
    for change in changes:
        assert (change.expected is None) == (change.kind == ChangeKind.APPEARED)
        if change.kind == ChangeKind.GONE:
            del state[change.physical_id]
        else:
            assert change.observation is not None
            state[change.physical_id] = change.observation.hash
    assert state == {pid: o.hash for pid, o in observed.items()}
    unchanged = {pid for pid in before.keys() & after.keys() if before[pid] == after[pid]}
    assert not unchanged & {c.physical_id for c in changes}


def test_snapshot_sequence_per_type() -> None:
    snapshot = Snapshot([], {"A": 3, "B": 4})
    assert snapshot.seq_of("A") == 3 and snapshot.seq_of("C") == 0 and snapshot.seq == 7


def test_change_notification_round_trips_and_rejects_strangers() -> None:
    note = ChangeNotification(
        type="T",
        physical_id="p1",
        kind=ChangeKind.CHANGED,
        seq=5,
        essence={"v": [1, 2]},
        hash="h",
        observed_at=12.5,
        stack_id="s",
        resource_id=3,
        resource_name="web",
    )
    data = note.to_dict()
    assert data["message"] == "change_notification" and data["version"] == 1
    assert data["kind"] == "changed"
    assert ChangeNotification.from_dict(data) == note
    assert note.is_managed and ChangeNotification.topic("T") == "entity.T"
    gone = ChangeNotification("T", "p2", ChangeKind.GONE, 6, None, None, 1.0)
    assert ChangeNotification.from_dict(gone.to_dict()) == gone
    assert not gone.is_managed
    with pytest.raises(MessageError, match="not a change_notification v1"):
        ChangeNotification.from_dict({**data, "version": 2})
    with pytest.raises(MessageError, match="malformed"):
        ChangeNotification.from_dict({**data, "kind": "exploded"})
