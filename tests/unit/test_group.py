"""Resource groups, decided as Heat's ResourceGroup and rolling_update decide them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from converge.core import group

DEF = {"type": "OS::Heat::TestResource", "properties": {"value": "m-%index%", "unset": None}}


def test_names_count_up_and_skip_what_was_removed() -> None:
    assert group.member_names(3, ()) == ["0", "1", "2"]
    assert group.member_names(3, ["1"]) == ["0", "2", "3"]
    assert group.member_names(0, ["0"]) == []


def test_index_var_is_replaced_in_properties_at_any_depth_and_unset_ones_are_left_out() -> None:
    definition = {
        "type": "T",
        "properties": {"a": "x-%index%", "b": ["%index%", {"c": "%index%%index%"}], "n": 4},
        "metadata": {"m": "%index%"},
    }
    snippet = group.member_definition("7", definition, "%index%")
    assert snippet["properties"] == {"a": "x-7", "b": ["7", {"c": "77"}], "n": 4}
    # Heat substitutes in properties only.
    assert snippet["metadata"] == {"m": "%index%"}
    assert group.member_definition("1", DEF, "%index%") == {
        "type": "OS::Heat::TestResource",
        "properties": {"value": "m-1"},
    }
    assert group.member_definition("2", DEF, "__i__")["properties"] == {"value": "m-%index%"}


def test_removal_policies_before_the_group_exists_take_every_entry_as_a_name() -> None:
    policies = [{"resource_list": ["1", 3]}]
    assert group.removed_names(policies, group.REMOVE_APPEND, (), None) == ["1", "3"]


def test_removal_by_reference_id_and_remembered_in_append_mode() -> None:
    refs = {"0": "ref-a", "1": "ref-b", "2": "ref-c"}
    policies = [{"resource_list": ["ref-c", "0", "no-such-thing"]}]
    assert group.removed_names(policies, group.REMOVE_APPEND, ["5"], refs) == ["0", "2", "5"]


def test_update_mode_forgets_earlier_removals() -> None:
    refs = {"0": "a", "2": "c"}
    assert group.removed_names([{"resource_list": ["2"]}], group.REMOVE_UPDATE, ["1"], refs) == [
        "2"
    ]
    assert group.removed_names([], group.REMOVE_UPDATE, ["1"], refs) == []


def test_heats_rolling_update_batches() -> None:
    # Five members, two at a time, one kept in service: 2 + 2 + 1 at the same size.
    assert group.batches(5, 5, 2, 1) == [
        group.Batch(5, 2),
        group.Batch(5, 2),
        group.Batch(5, 1),
    ]
    # Keeping every member in service means growing by the batch, then shrinking back
    # (Heat counts the first new member as extra capacity, not as an update).
    assert group.batches(2, 2, 1, 2) == [
        group.Batch(3, 1),
        group.Batch(3, 1),
        group.Batch(3, 1),
        group.Batch(2, 0),
    ]
    # A batched create starts from nothing.
    assert group.batches(5, 0, 2, 0) == [
        group.Batch(2, 2),
        group.Batch(4, 2),
        group.Batch(5, 1),
    ]


@given(
    target=st.integers(0, 30),
    current=st.integers(0, 30),
    size=st.integers(1, 10),
    minimum=st.integers(0, 30),
)
def test_batches_end_at_the_target_and_never_exceed_the_batch_size(
    target: int, current: int, size: int, minimum: int
) -> None:
    steps = group.batches(target, current, size, minimum)
    if target == current == 0:
        assert steps == []
        return
    assert steps, "at least one step unless there is nothing at all"
    assert steps[-1].capacity == target
    for step in steps:
        assert 0 <= step.new_members <= min(size, step.capacity)
    # Every member ends on the new definition: the new ones add up to at least the target.
    assert sum(step.new_members for step in steps) >= target


@given(
    target=st.integers(1, 12),
    current=st.integers(0, 12),
    size=st.integers(1, 5),
    minimum=st.integers(0, 12),
)
def test_stepping_through_batches_puts_every_member_on_the_new_definition(
    target: int, current: int, size: int, minimum: int
) -> None:
    old_def = {"type": "T", "properties": {"v": "old-%index%"}}
    new_def = {"type": "T", "properties": {"v": "new-%index%"}}
    members = group.members_from(group.member_names(current, ()), old_def, "%index%")
    for step in group.batches(target, current, size, minimum):
        names = group.member_names(step.capacity, ())
        before = dict(members)
        members = group.step_members(members, new_def, "%index%", names, target, step)
        assert len(members) == step.capacity
        changed = [n for n, s in members if before.get(n) != s]
        assert len(changed) <= step.new_members
        # min_in_service: that many members (bounded by the sizes) stay as they were.
        kept = [n for n, s in members if n in before and before[n] == s]
        assert len(kept) >= min(minimum, target, len(before))
    assert members == group.members_from(group.member_names(target, ()), new_def, "%index%")


def test_rolling_update_replaces_the_highest_members_first() -> None:
    old_def = {"type": "T", "properties": {"v": "old"}}
    new_def = {"type": "T", "properties": {"v": "new"}}
    members = group.members_from(["0", "1", "2"], old_def, "%index%")
    first = group.step_members(members, new_def, "%index%", ["0", "1", "2"], 3, group.Batch(3, 1))
    assert [s["properties"]["v"] for _, s in first] == ["old", "old", "new"]


def test_nested_template_outputs_every_reference_and_every_attribute() -> None:
    template = group.nested_template(group.members_from(["0", "2"], DEF, "%index%"))
    assert set(template["resources"]) == {"0", "2"}
    outputs = template["outputs"]
    assert outputs["refs_map"]["value"] == {
        "0": {"get_resource": "0"},
        "2": {"get_resource": "2"},
    }
    assert outputs["attributes"]["value"]["2"] == {"get_attr": ["2"]}


def test_group_attributes_as_heat_answers_them() -> None:
    names = ["1", "2"]
    refs = {"1": "r1", "2": "r2"}
    attributes = {"1": {"out": "a"}, "2": {"out": "b"}}
    removed = ["0"]

    def attr(name: str) -> object:
        return group.group_attribute(name, names, refs, attributes, removed)

    assert attr("refs") == ["r1", "r2"]
    assert attr("refs_map") == {"1": "r1", "2": "r2"}
    assert attr("removed_rsrc_list") == ["0"]
    assert attr("out") == ["a", "b"]
    assert attr("attributes") == {"out": {"1": "a", "2": "b"}}
    assert attr("resource.2") == "r2"
    assert attr("resource.1.out") == "a"
    assert attr("resource.9.out") is None


def test_chain_members_depend_on_the_one_before_unless_concurrent() -> None:
    chain = list(group.chain_template(["A", "B", "C"], {"p": 1}, concurrent=False))
    assert [name for name, _ in chain] == ["0", "1", "2"]
    assert "depends_on" not in chain[0][1]
    assert chain[2][1]["depends_on"] == ["1"]
    assert chain[1][1]["properties"] == {"p": 1}
    concurrent = list(group.chain_template(["A", "B"], None, concurrent=True))
    assert all("depends_on" not in snippet for _, snippet in concurrent)
