"""An embedded engine killed with SIGKILL: the next run on this host takes over at once."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from converge.api import Converge
from converge.engine import liveness
from converge.resources.builtin import world
from support import hanging
from support.world import FAST, eventually

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


_CHECKING = """
import asyncio, sys
from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.builtin import world
from support import hanging

async def main(state, world_path, template):
    settings = EngineSettings(plugin_settings={world.SETTING: world_path})
    async with Converge.embedded(state, settings=settings, registry=hanging.registry()) as cv:
        await cv.create_stack("checked", template)
        await cv.check_stack("checked", wait=False)
        while any(
            r.resource_status != "CHECK_COMPLETE"
            for r in await cv.list_resources("checked")
            if r.resource_name.startswith("plain")
        ):
            await asyncio.sleep(0.05)
        print("half checked", flush=True)
        await asyncio.Event().wait()

asyncio.run(main(*sys.argv[1:]))
"""


@pytest.mark.skipif(not liveness.can_tell(), reason="needs Linux /proc")
async def test_a_check_of_a_killed_engine_is_resumed_by_the_next_one(tmp_path: Path) -> None:
    """An embedded engine killed mid-CHECK (the plain resources checked, the others'
    observations hanging): the next engine's sweeper re-sends the unfinished nodes only,
    and the check completes without starting again."""
    template = "\n".join(
        [
            "heat_template_version: 2021-04-16",
            "resources:",
            *(f"  hang{i}: {{type: {hanging.TYPE}}}" for i in range(2)),
            *(f"  plain{i}: {{type: OS::Heat::None}}" for i in range(2)),
        ]
    )
    state, world_path = tmp_path / "s.db", tmp_path / "world.db"
    env = {**os.environ, "HANG_OBSERVE": "1", "PYTHONPATH": str(Path(__file__).parents[1])}
    child = subprocess.Popen(
        [sys.executable, "-c", _CHECKING, str(state), str(world_path), template],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), 60)
        assert line.strip() == "half checked"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.communicate()
    settings = dataclasses.replace(FAST, plugin_settings={world.SETTING: str(world_path)})
    async with Converge.embedded(state, settings=settings, registry=hanging.registry()) as cv:

        async def checked() -> bool:
            return (await cv.get_stack("checked")).stack_status == "CHECK_COMPLETE"

        await eventually(checked, timeout=30)
        assert cv.engine.sweeper_rescues >= 2  # the nodes the dead engine never finished
        events = await cv.list_events("checked")
    stack_reasons = [e.resource_status_reason for e in events if e.resource_name == "checked"]
    assert stack_reasons.count("Stack CHECK started") == 1
    assert stack_reasons[-1] == "Stack CHECK completed successfully (4 in sync)"
    observed = [
        e.resource_name
        for e in events
        if e.resource_status == "CHECK_COMPLETE" and e.resource_name != "checked"
    ]
    assert sorted(observed) == ["hang0", "hang1", "plain0", "plain1"]  # each one once
