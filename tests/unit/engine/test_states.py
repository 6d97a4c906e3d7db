"""The resource transition table, walked."""

from __future__ import annotations

import itertools

import pytest

from converge.core.states import Action, Status, check_resource_transition, state_name
from converge.errors import InvalidTransition


def test_every_settled_state_may_start_any_action() -> None:
    for action, status in itertools.product(Action, (Status.COMPLETE, Status.FAILED)):
        for new_action in Action:
            if new_action == Action.INIT and action != Action.INIT:
                continue
            check_resource_transition("r", (action, status), (new_action, Status.IN_PROGRESS))


def test_cannot_go_back_to_init() -> None:
    with pytest.raises(
        InvalidTransition,
        match="resource web: cannot go back from CREATE_COMPLETE to INIT_COMPLETE",
    ):
        check_resource_transition(
            "web", (Action.CREATE, Status.COMPLETE), (Action.INIT, Status.COMPLETE)
        )


def test_state_name() -> None:
    assert state_name(Action.CREATE, Status.COMPLETE) == "CREATE_COMPLETE"
