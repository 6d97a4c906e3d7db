"""Telling a dead engine of this host from a live one by its process, not its heartbeat."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from converge.engine import liveness
from converge.records import ServiceRecord

pytestmark = pytest.mark.skipif(not liveness.can_tell(), reason="needs Linux /proc")


def service(pid: int, process_start: str | None, host: str = "here") -> ServiceRecord:
    return ServiceRecord("e", host, pid, ("engine",), 0.0, 0.0, process_start)


def test_this_process_is_alive_and_a_recycled_pid_is_not() -> None:
    me = liveness.process_start(os.getpid())
    assert me is not None
    assert not liveness.is_dead_here(service(os.getpid(), me), "here")
    boot_id, _ = me.split(":")
    assert liveness.is_dead_here(service(os.getpid(), f"{boot_id}:1"), "here")  # pid reused


def test_a_process_that_exited_is_dead() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = liveness.process_start(child.pid)
    child.wait()
    assert liveness.is_dead_here(service(child.pid, start or "unknown"), "here")


def test_other_hosts_and_rows_without_a_process_are_left_to_the_heartbeat() -> None:
    assert not liveness.is_dead_here(service(2**22 + 7, "x:1", host="elsewhere"), "here")
    assert not liveness.is_dead_here(service(2**22 + 7, None), "here")
