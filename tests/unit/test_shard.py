"""Rendezvous hashing: one owner per key, and a membership change moves only what it must."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converge.core.shard import owner, share

members_st = st.sets(st.uuids().map(str), min_size=1, max_size=8)
keys_st = st.lists(st.uuids().map(str), min_size=1, max_size=40, unique=True)


@given(members_st, keys_st)
def test_the_owner_is_a_member_and_every_key_has_exactly_one(
    members: set[str], keys: list[str]
) -> None:
    shares = [share(keys, member, members) for member in members]
    assert sorted(k for s in shares for k in s) == sorted(keys)
    for key in keys:
        assert owner(key, members) in members
        # the order the members are listed in does not matter: every process agrees
        assert owner(key, sorted(members, reverse=True)) == owner(key, sorted(members))


@given(members_st, keys_st, st.data())
def test_a_dead_member_moves_only_its_own_keys(
    members: set[str], keys: list[str], data: st.DataObject
) -> None:
    if len(members) < 2:
        return
    dead = data.draw(st.sampled_from(sorted(members)))
    survivors = members - {dead}
    for key in keys:
        before = owner(key, members)
        after = owner(key, survivors)
        if before != dead:
            assert after == before  # a survivor's share stays where it was
        else:
            assert after in survivors  # the dead one's share is picked up


@given(members_st, keys_st, st.uuids().map(str))
def test_a_joining_member_takes_keys_only_for_itself(
    members: set[str], keys: list[str], newcomer: str
) -> None:
    for key in keys:
        after = owner(key, members | {newcomer})
        assert after in (owner(key, members), newcomer)


def test_keys_spread_over_the_members() -> None:
    members = {f"engine-{i}" for i in range(4)}
    keys = [f"stack-{i}" for i in range(2000)]
    sizes = [len(share(keys, member, members)) for member in members]
    assert min(sizes) > 350, sizes  # 500 each on average


def test_no_member_is_an_error() -> None:
    with pytest.raises(ValueError, match="no live member"):
        owner("stack", set())
