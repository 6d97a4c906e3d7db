"""Whether an operation was superseded, judged from the stack record alone."""

from __future__ import annotations

import pytest

from converge.core.states import Action, Status
from converge.engine.operations import is_superseded
from converge.records import StackRecord

MINE, OLDER, NEWER = 5, 4, 6


def stack(action: Action, status: Status, raw: int, prev: int | None) -> StackRecord:
    return StackRecord(
        id="s",
        name="s",
        project_id="p",
        action=action,
        status=status,
        status_reason="",
        raw_template_id=raw,
        prev_raw_template_id=prev,
        current_traversal="t",
        disable_rollback=False,
        timeout_mins=None,
        drift_policy="notify",
        atomic_key=1,
        created_at=0.0,
        updated_at=None,
        deadline=None,
    )


@pytest.mark.parametrize(
    ("record", "superseded"),
    [
        (stack(Action.UPDATE, Status.IN_PROGRESS, MINE, OLDER), False),  # still running
        (stack(Action.UPDATE, Status.COMPLETE, MINE, OLDER), False),
        (stack(Action.UPDATE, Status.FAILED, MINE, OLDER), False),
        (stack(Action.ROLLBACK, Status.COMPLETE, OLDER, MINE), False),  # its own rollback
        (stack(Action.UPDATE, Status.IN_PROGRESS, NEWER, OLDER), True),
        (stack(Action.UPDATE, Status.COMPLETE, NEWER, MINE), True),  # built on it, unfinished
        (stack(Action.DELETE, Status.IN_PROGRESS, NEWER, MINE), True),
        (stack(Action.ROLLBACK, Status.COMPLETE, OLDER, NEWER), True),  # someone else's
    ],
)
def test_is_superseded(record: StackRecord, superseded: bool) -> None:
    assert is_superseded(record, MINE) is superseded
