"""An embedded engine killed with SIGKILL: the next run on this host takes over at once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from converge.engine import liveness

SLOW = """\
heat_template_version: 2018-08-31
parameters:
  wait:
    type: number
    default: 120
resources:
  slow:
    type: OS::Heat::TestResource
    properties:
      wait_secs: {get_param: wait}
"""

_PROGRAM = "from converge.cli.main import main\nmain()\n"


@pytest.mark.skipif(not liveness.can_tell(), reason="needs Linux /proc")
def test_the_claims_of_a_killed_engine_are_taken_over_at_once(tmp_path: Path) -> None:
    (tmp_path / "slow.yaml").write_text(SLOW)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")}
    env["PYTHONUNBUFFERED"] = "1"
    command = [sys.executable, "-c", _PROGRAM, "apply", "slow.yaml", "--state", "s.db"]
    killed = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert killed.stdout is not None
        line, deadline = "", time.monotonic() + 60
        # The resource's own event (the stack, named slow too, starts with "Stack CREATE
        # started"): once it is printed, that engine has claimed the resource.
        claimed = "slow  CREATE_IN_PROGRESS  state changed"
        while claimed not in line and time.monotonic() < deadline:
            line = killed.stdout.readline()
        assert claimed in line
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
    finally:
        killed.kill()
        killed.communicate()
    with sqlite3.connect(tmp_path / "s.db") as conn:  # its service row and claim remain
        assert conn.execute("SELECT pid FROM service").fetchall() == [(killed.pid,)]
        assert conn.execute("SELECT engine_id FROM resource").fetchone()[0]
    conn.close()

    started = time.monotonic()
    again = subprocess.run(
        [*command, "-P", "wait=0", "-f", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.monotonic() - started
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["stack_status"] == "UPDATE_COMPLETE"
    # Before, the claim was held until the heartbeat went stale (30 s).
    assert took < 20, took
