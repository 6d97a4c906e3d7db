"""Starting and stopping a ``Local::Process`` service: the launcher, readiness, signals.

Apart from the plugin (``process.py``) so that reading its schema does not load asyncio.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from converge.errors import PermanentFailure
from converge.resources.base import ResourceContext
from converge.resources.local import procfs
from converge.resources.local.confined import locate_recorded, open_append, open_directory
from converge.resources.local.paths import ConfinementError
from converge.resources.local.process import Readiness

LAUNCHER = Path(__file__).with_name("launcher.py")
LAUNCH_TIMEOUT = 10.0
_POLL = 0.02
_READY_POLL = 0.03


async def find_marked(physical_name: str) -> list[tuple[procfs.ProcessIdentity, str | None]]:
    """The processes whose environment names this resource, read from /proc on a thread."""
    return await asyncio.to_thread(procfs.find_marked, physical_name)


async def launch(ctx: ResourceContext, spec: Mapping[str, Any]) -> procfs.ProcessIdentity:
    descriptors = await asyncio.to_thread(_open_places, ctx, spec)
    try:
        return await _run_launcher(ctx, {**spec, **descriptors})
    finally:
        for fd in descriptors.values():
            os.close(fd)


def _open_places(ctx: ResourceContext, spec: Mapping[str, Any]) -> dict[str, int]:
    """The working directory and the log, opened from the root down without following a
    symlink (``confined``): the launcher uses these descriptors, never the paths, so a
    parent swapped for a symlink after the check cannot lead the service or its log out."""
    descriptors: dict[str, int] = {}
    try:
        descriptors["cwd_fd"] = open_directory(locate_recorded(spec["cwd"], ctx.allowed_roots))
        if spec["log"] == os.devnull:
            descriptors["log_fd"] = os.open(os.devnull, os.O_WRONLY | os.O_CLOEXEC)
        else:
            descriptors["log_fd"] = open_append(locate_recorded(spec["log"], ctx.allowed_roots))
    except (ConfinementError, OSError) as exc:
        for fd in descriptors.values():
            os.close(fd)
        raise PermanentFailure(
            f"{ctx.resource_name}: cannot open the working directory or the log: {exc}"
        ) from None
    return descriptors


async def _run_launcher(ctx: ResourceContext, spec: Mapping[str, Any]) -> procfs.ProcessIdentity:
    launcher = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-S",
        str(LAUNCHER),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        pass_fds=(spec["cwd_fd"], spec["log_fd"]),
    )
    try:
        async with asyncio.timeout(LAUNCH_TIMEOUT):
            out, err = await launcher.communicate(json.dumps(spec).encode())
    except TimeoutError:
        launcher.kill()
        await launcher.wait()
        raise PermanentFailure(f"{ctx.resource_name}: the launcher did not answer") from None
    try:
        answer = json.loads(out)
    except ValueError:
        raise PermanentFailure(
            f"{ctx.resource_name}: the launcher failed: {err.decode(errors='replace')[-500:]}"
        ) from None
    if "error" in answer:
        raise PermanentFailure(
            f"{ctx.resource_name}: cannot start {spec['argv'][0]}: {answer['error']}"
        )
    identity = procfs.read(int(answer["pid"]))
    if identity is None:
        raise PermanentFailure(
            f"{ctx.resource_name}: {spec['argv'][0]} exited at once{_log_tail(spec['log'])}"
        )
    return identity


async def await_ready(
    ctx: ResourceContext,
    identity: procfs.ProcessIdentity,
    spec: Mapping[str, Any],
    ready: Readiness,
    grace: float,
) -> procfs.ProcessIdentity:
    """Fail create unless the process proves it runs; else its identity as it settled
    (the command line as it reads after any re-exec of a wrapper). Not ready in time, it
    is stopped with ``grace`` seconds of SIGTERM."""
    loop = asyncio.get_running_loop()
    started = loop.time()  # real time: the process lives in the real world
    program = identity.cmdline[0] if identity.cmdline else spec["argv"][0]
    while True:
        settled = procfs.read(identity.pid)
        if settled is None or settled != identity:
            raise PermanentFailure(
                f"{ctx.resource_name}: {program} exited during startup{_log_tail(spec['log'])}"
            )
        missing = await asyncio.to_thread(ready.missing, identity)
        elapsed = loop.time() - started
        if missing is None and elapsed >= ready.min_uptime:
            return settled
        if missing is not None and elapsed >= ready.timeout:
            # Not ready is not running: stop it, or a failed create would leave it behind.
            await stop(identity, grace)
            raise PermanentFailure(
                f"{ctx.resource_name}: {program} was not ready after {ready.timeout:g} s: "
                f"{missing} (ready_timeout_secs){_log_tail(spec['log'])}"
            )
        pause = _READY_POLL if missing is not None else ready.min_uptime - elapsed
        await asyncio.sleep(max(0.0, min(pause, _READY_POLL * 10)))


def _log_tail(log: str) -> str:
    if log == os.devnull:
        return " (no log_file to show its output)"
    try:
        text = Path(log).read_text(errors="replace")[-400:].strip()
    except OSError:
        return ""
    return f"; the end of {log}: {text}" if text else f" ({log} is empty)"


async def stop(identity: procfs.ProcessIdentity, grace: float) -> None:
    """SIGTERM the process's group, SIGKILL it after ``grace`` seconds; gone is success."""
    fd = _open_pidfd(identity.pid)
    try:
        if not procfs.is_running(identity):
            return  # gone, or the pid now belongs to someone else
        _signal(identity.pid, signal.SIGTERM)
        if await _exited(identity, fd, grace):
            return
        _signal(identity.pid, signal.SIGKILL)
        await _exited(identity, fd, 5.0)
    finally:
        if fd is not None:
            os.close(fd)


def _open_pidfd(pid: int) -> int | None:
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError:
        return None


def _signal(pid: int, signum: signal.Signals) -> None:
    """The whole group when the process leads one (as ours do), else the process alone."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        pass


async def _exited(identity: procfs.ProcessIdentity, fd: int | None, timeout: float) -> bool:
    if fd is not None:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        loop.add_reader(fd, _resolve, done)
        try:
            async with asyncio.timeout(timeout):
                await done
        except TimeoutError:
            pass
        finally:
            loop.remove_reader(fd)
        return not procfs.is_running(identity)
    deadline = loop_time() + timeout
    while procfs.is_running(identity):
        if loop_time() >= deadline:
            return False
        await asyncio.sleep(_POLL)
    return True


def _resolve(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def loop_time() -> float:
    return asyncio.get_running_loop().time()
