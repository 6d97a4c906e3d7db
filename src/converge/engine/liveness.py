"""Whether an engine that registered on this host is still the process it was.

A heartbeat says an engine is alive only by going stale (``engine_stale_after``), so an
engine killed with SIGKILL held its claims for that long. On the same host we can ask
the kernel: the pid recorded in the service row either no longer exists or belongs to
another process (pids are recycled; boot id and start time tell them apart).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from converge.records import ServiceRecord

PROC = Path("/proc")


def host_name() -> str:
    return socket.gethostname()


def process_start(pid: int) -> str | None:
    """``"<boot id>:<start ticks>"`` of the live process ``pid``; None if there is none
    (or it is a zombie) or this system has no /proc to ask."""
    try:
        boot_id = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    return f"{boot_id}:{fields[19]}"


def can_tell() -> bool:
    """Whether this system lets us check processes (Linux /proc)."""
    return process_start(os.getpid()) is not None


def is_dead_here(service: ServiceRecord, host: str) -> bool:
    """True only when the engine surely ran on this host and its process is gone.

    Rows from other hosts, or without a recorded process identity (older converge, no
    /proc), are left to the heartbeat.
    """
    if service.host != host or service.process_start is None or not can_tell():
        return False
    return process_start(service.pid) != service.process_start
