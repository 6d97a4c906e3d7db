"""The traversal id a nested stack's operation gets from its owner's traversal."""

from __future__ import annotations

from converge.engine.nested import child_traversal_id

TARGET = {"template": {"resources": {"a": {"type": "OS::Heat::None"}}}, "parameters": {"n": 1}}


def test_a_repeated_request_gets_the_same_id() -> None:
    first = child_traversal_id("t1", "outer-box-1a2b3c4d", TARGET)
    # Built again from the same data (key order does not matter).
    again = child_traversal_id("t1", "outer-box-1a2b3c4d", dict(reversed(list(TARGET.items()))))
    assert first == again
    assert len(first) == 32 and int(first, 16) >= 0  # shaped like every traversal id


def test_another_traversal_stack_or_target_gets_another_id() -> None:
    first = child_traversal_id("t1", "outer-box-1a2b3c4d", TARGET)
    assert child_traversal_id("t2", "outer-box-1a2b3c4d", TARGET) != first
    assert child_traversal_id("t1", "outer-box-5e6f7a8b", TARGET) != first
    # Each step of a rolling update converges the group's stack to another template.
    step = {**TARGET, "parameters": {"n": 2}}
    assert child_traversal_id("t1", "outer-box-1a2b3c4d", step) != first
