"""Processes as /proc shows them: identity by pid, start time and command line.

A pid alone is not an identity (the kernel recycles pids); pid and start time (clock ticks
since boot) together are. The command line is recorded with them but not compared: a wrapper
(a pyenv shim, a shell script) re-executes itself under another command line while pid and
start time stay. Zombies count as gone. Processes that converge starts carry
``CONVERGE_RESOURCE=<physical name>`` and ``CONVERGE_SPEC=<digest of what was asked>`` in
their environment, so an interrupted create finds what it started and knows whether it is
still what the template asks for.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PROC = Path("/proc")
MARKER_VARIABLE = "CONVERGE_RESOURCE"
SPEC_VARIABLE = "CONVERGE_SPEC"


@dataclass(frozen=True)
class ProcessIdentity:
    pid: int
    start_ticks: int
    cmdline: tuple[str, ...] = field(default=(), compare=False)

    @property
    def physical_id(self) -> str:
        return f"{self.pid}:{self.start_ticks}"

    def as_data(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "start_ticks": self.start_ticks,
            "cmdline": list(self.cmdline),
            "started_at": started_at(self.start_ticks),
        }


def read(pid: int) -> ProcessIdentity | None:
    """The live process with this pid; None when there is none or it is a zombie."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        raw_cmdline = (PROC / str(pid) / "cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] in ("Z", "X"):
        return None
    cmdline = tuple(part.decode("utf-8", "surrogateescape") for part in raw_cmdline.split(b"\0"))
    if cmdline and cmdline[-1] == "":
        cmdline = cmdline[:-1]
    return ProcessIdentity(pid, int(fields[19]), cmdline)


def is_running(identity: ProcessIdentity) -> bool:
    """Whether that very process (same pid and start time) still runs."""
    return read(identity.pid) == identity


def identity_of(data: Mapping[str, Any]) -> ProcessIdentity | None:
    """The identity stored in a resource's plugin data."""
    try:
        return ProcessIdentity(
            int(data["pid"]), int(data["start_ticks"]), tuple(str(p) for p in data["cmdline"])
        )
    except (KeyError, TypeError, ValueError):
        return None


def find_marked(marker: str) -> list[tuple[ProcessIdentity, str | None]]:
    """Live processes carrying this resource marker, with their spec digest (leaders first)."""
    needle = f"{MARKER_VARIABLE}={marker}".encode()
    spec_prefix = f"{SPEC_VARIABLE}=".encode()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            variables = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if needle not in variables:
            continue
        identity = read(int(entry.name))
        if identity is None:
            continue
        spec = next(
            (v[len(spec_prefix) :].decode() for v in variables if v.startswith(spec_prefix)),
            None,
        )
        found.append((identity, spec))
    found.sort(key=lambda item: (item[0].pid != _session_of(item[0].pid), item[0].pid))
    return found


_TCP_LISTEN = "0A"


def is_listening(session: int, port: int) -> bool:
    """Whether a process of ``session`` holds a TCP socket listening on ``port``.

    Connecting is no proof: with the port taken, the connection reaches someone else's
    server. The socket's inode, from /proc/net/tcp{,6}, must be one of the session's fds.
    """
    inodes = _listening_inodes(port)
    if not inodes:
        return False
    return any(_holds_any(pid, inodes) for pid in _session_members(session))


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # sl local_address rem_address st ... inode (the 10th field)
            listening = len(fields) > 9 and fields[3] == _TCP_LISTEN
            if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def _session_members(session: int) -> Iterator[int]:
    """The session leader first (the usual listener), then, lazily, the rest of its session."""
    yield session
    for entry in PROC.iterdir():
        pid = int(entry.name) if entry.name.isdigit() else session
        if pid != session and _session_of(pid) == session:
            yield pid


def _holds_any(pid: int, inodes: set[str]) -> bool:
    fd_dir = PROC / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return False
    for name in names:
        try:
            target = os.readlink(fd_dir / name)
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def _session_of(pid: int) -> int:
    try:
        return os.getsid(pid)
    except OSError:
        return -1


def _boot_time() -> float:
    for line in (PROC / "stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return 0.0


def started_at(start_ticks: int) -> str:
    """The start time as ISO 8601 (UTC, whole seconds)."""
    seconds = _boot_time() + start_ticks / os.sysconf("SC_CLK_TCK")
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=0).isoformat()
