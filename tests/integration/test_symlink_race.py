"""Confinement holds while converge acts: a parent swapped for a symlink never leads out.

A thread exchanges a directory inside the allowed root with a symlink to one outside, as
fast as it can, while files are created, updated and deleted below it and a
``purge_on_delete`` directory is made and purged. Before the descriptor walk
(``resources/local/confined.py``) every phase wrote, marked or deleted outside in most runs
of this many rounds; now an action that meets the symlink fails, and nothing outside changes.
"""

from __future__ import annotations

import pytest

from support.symlink_race import PHASES, race


@pytest.mark.parametrize("phase", PHASES)
def test_a_swapped_parent_never_leads_outside_the_root(phase: str) -> None:
    result = race(phase, rounds=6, files=10)
    assert result.escapes == []
    assert result.bugs == []  # every refusal is a PermanentFailure with a message
    assert result.swaps > 0 and result.refused > 0, "the race never met a swap"
