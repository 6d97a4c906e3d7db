"""Stack creation is atomic: no stack without its template, one winner among concurrent creates."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import StatementError

from converge.api import Converge
from converge.errors import Conflict, NotFound

TEMPLATE = """\
heat_template_version: 2018-08-31
resources:
  first:
    type: OS::Heat::TestResource
    properties:
      value: hi
"""


async def test_a_create_whose_template_cannot_be_stored_leaves_nothing(cv: Converge) -> None:
    unstorable: Any = {"blob.bin": object()}  # not JSON: the template insert fails
    with pytest.raises((TypeError, StatementError)):
        await cv.create_stack("demo", TEMPLATE, files=unstorable)
    with pytest.raises(NotFound):
        await cv.get_stack("demo")
    created = await cv.create_stack("demo", TEMPLATE)  # the name is free; nothing half-made
    assert created.stack_status == "CREATE_COMPLETE"
    updated = await cv.update_stack("demo", TEMPLATE.replace("hi", "ho"))
    assert updated.stack_status == "UPDATE_COMPLETE"


async def test_concurrent_creates_of_one_name_one_wins_the_other_conflicts(cv: Converge) -> None:
    results = await asyncio.gather(
        cv.create_stack("demo", TEMPLATE),
        cv.create_stack("demo", TEMPLATE),
        return_exceptions=True,
    )
    conflicts = [r for r in results if isinstance(r, Conflict)]
    done = [r for r in results if not isinstance(r, BaseException)]
    assert len(conflicts) == 1 and len(done) == 1, results
    assert "a stack named 'demo' already exists in" in str(conflicts[0])
    assert done[0].stack_status == "CREATE_COMPLETE"


_PROGRAM = "from converge.cli.main import main\nmain()\n"


def test_two_concurrent_applies_of_a_new_stack_never_crash(tmp_path: Path) -> None:
    """Each either creates, updates what the other created, or says the name is taken
    (exit 4); the stack ends complete (a half-made stack made the loser exit 70). A
    create superseded by the other's update ends with exit 6 and says so; so does an update
    whose traversal started before the other's create started its own."""
    (tmp_path / "demo.yaml").write_text(TEMPLATE)
    command = [sys.executable, "-c", _PROGRAM, "apply", "demo.yaml", "--state", "s.db"]
    processes = [
        subprocess.Popen(
            command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outcomes = [(p.wait(timeout=60), p.communicate()[1]) for p in processes]
    for code, stderr in outcomes:
        assert code in (0, 4, 6), outcomes
        if code == 4:
            assert "a stack named 'demo' already exists in" in stderr, outcomes
        if code == 6:
            assert re.search(r"the (create|update) of stack demo was superseded", stderr), outcomes
    assert any(code == 0 for code, _ in outcomes)
    with sqlite3.connect(tmp_path / "s.db") as conn:
        stacks = conn.execute("SELECT name, status, raw_template_id FROM stack").fetchall()
    conn.close()
    assert len(stacks) == 1 and stacks[0][:2] == ("demo", "COMPLETE"), stacks
    assert stacks[0][2] is not None
