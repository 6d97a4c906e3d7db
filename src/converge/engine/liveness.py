"""Whether an engine that registered on this host is still the process it was.

A heartbeat says an engine is alive only by going stale (``engine_stale_after``), so an
engine killed with SIGKILL held its claims for that long. On the same host we can ask
the kernel: the pid recorded in the service row either no longer exists or belongs to
another process (pids are recycled; boot id and start time tell them apart).
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from converge.ports import Store
from converge.records import ServiceRecord

log = logging.getLogger("converge.engine.liveness")

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


async def live_services(
    store: Store, me: str, now: float, stale_after: float
) -> list[ServiceRecord]:
    """The other processes alive now: a heartbeat newer than ``stale_after`` seconds.

    The rows of processes of this host that are gone are removed on the way, so their
    claims, leases and shares are taken over now rather than when their heartbeat goes
    stale.
    """
    host = host_name()
    alive: list[ServiceRecord] = []
    for service in await store.list_services():
        if service.engine_id == me:
            continue
        if is_dead_here(service, host):
            log.info(
                "process of this host is gone: taking over its work",
                extra={"engine_id": service.engine_id, "pid": service.pid},
            )
            await store.remove_service(service.engine_id)
        elif service.heartbeat_at > now - stale_after:
            alive.append(service)
    return alive
