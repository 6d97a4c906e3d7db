"""Local::Process with real processes: start, identity, adoption, exit push, graceful stop."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext, ValidationContext
from converge.resources.local import LocalProcess, procfs
from converge.resources.local.watch import ProcessWatcher

MakeContext = Callable[..., ResourceContext]

SLEEPER = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]
# Ignores SIGTERM: only SIGKILL stops it.
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\n"
    "while True: time.sleep(1)",
]


def props(command: list[str], **extra: object) -> dict[str, object]:
    wanted = {
        "command": command,
        "environment": {},
        "working_directory": ".",
        "log_file": "service.log",
        "stop_grace_secs": 2,
        "startup_check_secs": 0.05,
        **extra,
    }
    return {key: value for key, value in wanted.items() if value is not None}


async def test_a_started_process_is_detached_observed_and_stopped(
    root: Path, make_context: MakeContext
) -> None:
    plugin, ctx = LocalProcess(), make_context()
    wanted = props(SLEEPER, environment={"GREETING": "hi"})
    outcome = await plugin.create(ctx, wanted)
    pid = outcome.data["pid"]
    assert outcome.physical_id == f"{pid}:{outcome.data['start_ticks']}"
    assert os.getsid(pid) == pid  # its own session: a terminal or engine exit does not reach it
    assert os.getppid() != procfs_parent(pid)  # not the engine's child: it outlives it
    environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"GREETING=hi" in environment
    assert f"CONVERGE_RESOURCE={ctx.physical_name}".encode() in environment
    applied = AppliedState(outcome.physical_id, wanted, outcome.data)
    assert await plugin.observe(ctx, applied) == wanted
    attributes = await plugin.attributes(ctx, applied, ["pid", "started_at"])
    assert attributes["pid"] == pid and attributes["started_at"].endswith("+00:00")

    await plugin.delete(ctx, applied)
    assert procfs.read(pid) is None
    assert await plugin.observe(ctx, applied) is None
    await plugin.delete(ctx, applied)  # already gone: success


def procfs_parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


async def test_an_interrupted_create_adopts_the_process_it_started(
    make_context: MakeContext,
) -> None:
    plugin, ctx = LocalProcess(), make_context()
    first = await plugin.create(ctx, props(SLEEPER))
    again = await plugin.create(ctx, props(SLEEPER))
    assert again.physical_id == first.physical_id
    assert len(procfs.find_marked(ctx.physical_name)) == 1
    # Asked for something else under the same row: the old one goes, a new one comes.
    other = await plugin.create(ctx, props(SLEEPER, environment={"V": "2"}))
    assert other.physical_id != first.physical_id
    assert [i.pid for i, _ in procfs.find_marked(ctx.physical_name)] == [other.data["pid"]]


async def test_a_recycled_pid_is_not_taken_for_the_process(make_context: MakeContext) -> None:
    plugin, ctx = LocalProcess(), make_context()
    outcome = await plugin.create(ctx, props(SLEEPER))
    # The same pid with another start time: some other process now.
    impostor = {**outcome.data, "start_ticks": outcome.data["start_ticks"] - 1}
    stale = AppliedState("x", props(SLEEPER), impostor)
    assert await plugin.observe(ctx, stale) is None
    other_ctx = make_context()
    await plugin.delete(other_ctx, stale)
    assert procfs.read(outcome.data["pid"]) is not None  # not killed


async def test_stopping_escalates_to_sigkill_after_the_grace(make_context: MakeContext) -> None:
    plugin, ctx = LocalProcess(), make_context()
    wanted = props(STUBBORN, stop_grace_secs=0.3, startup_check_secs=0.3)
    outcome = await plugin.create(ctx, wanted)
    started = time.monotonic()
    await plugin.delete(ctx, AppliedState(outcome.physical_id, wanted, outcome.data))
    took = time.monotonic() - started
    assert procfs.read(outcome.data["pid"]) is None
    assert 0.3 <= took < 3


async def test_a_kill_is_pushed_at_once(make_context: MakeContext) -> None:
    plugin, ctx = LocalProcess(), make_context()
    outcome = await plugin.create(ctx, props(SLEEPER))
    managed = {outcome.physical_id: AppliedState(outcome.physical_id, props(SLEEPER), outcome.data)}
    changes = ProcessWatcher(managed).changes()
    try:
        waiting = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        started = time.monotonic()
        os.kill(outcome.data["pid"], signal.SIGKILL)
        assert await asyncio.wait_for(waiting, 2) == outcome.physical_id
        assert time.monotonic() - started < 0.5
    finally:
        await changes.aclose()


async def test_a_process_that_dies_at_once_fails_create_with_its_output(
    root: Path, make_context: MakeContext
) -> None:
    command = [sys.executable, "-c", "import sys; print('bad config'); sys.exit(3)"]
    with pytest.raises(PermanentFailure, match=r"exited .*bad config"):
        await LocalProcess().create(make_context(), props(command, startup_check_secs=0.5))


def test_validation_refuses_missing_commands_and_escaping_directories(root: Path) -> None:
    ctx = ValidationContext(allowed_roots=(root,))
    problems = dict(
        LocalProcess().validate(
            {
                "command": ["no-such-program-xyz"],
                "working_directory": "../..",
                "log_file": "/var/log/x.log",
                "environment": {"CONVERGE_RESOURCE": "x"},
            },
            ctx,
        )
    )
    assert problems["command"] == "command 'no-such-program-xyz' was not found on PATH"
    assert "outside the allowed roots" in problems["working_directory"]
    assert "outside the allowed roots" in problems["log_file"]
    assert "reserved" in problems["environment"]
    assert list(LocalProcess().validate({"command": ["python3", "-V"]}, ctx)) == []


def _listener(port: int) -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen()
    return listener


SERVER = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1"]


async def test_a_server_whose_port_is_taken_fails_create_with_its_error(
    make_context: MakeContext,
) -> None:
    # The port answers (someone else's server): only the process's own socket counts.
    with _listener(0) as taken:
        port = taken.getsockname()[1]
        wanted = props([*SERVER, str(port)], startup_check_secs=None, ready_port=port)
        with pytest.raises(
            PermanentFailure, match=r"(?s)exited during startup.*Address already in use"
        ):
            await LocalProcess().create(make_context(), wanted)


async def test_a_ready_port_is_waited_for_and_proves_the_server_runs(
    make_context: MakeContext,
) -> None:
    with _listener(0) as probe:
        port = probe.getsockname()[1]
    slow = [sys.executable, "-c", SLOW_SERVER, str(port)]
    outcome = await LocalProcess().create(
        make_context(), props(slow, startup_check_secs=None, ready_port=port)
    )
    # create returned only once the server listened: a connection is accepted now.
    with socket.create_connection(("127.0.0.1", port), timeout=2):
        pass
    assert procfs.is_listening(outcome.data["pid"], port)


SLOW_SERVER = (
    "import socket, sys, time\n"
    "time.sleep(0.4)\n"
    "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
    "while True: s.accept()[0].close()\n"
)


async def test_a_server_that_never_becomes_ready_is_stopped_and_fails(
    make_context: MakeContext,
) -> None:
    ctx = make_context()
    wanted = props(
        SLEEPER, startup_check_secs=None, ready_file="ready.flag", ready_timeout_secs=0.3
    )
    with pytest.raises(
        PermanentFailure, match=r"not ready after 0.3 s: .*ready.flag does not exist"
    ):
        await LocalProcess().create(ctx, wanted)
    assert procfs.find_marked(ctx.physical_name) == []  # not left running


async def test_a_ready_file_ends_the_wait(root: Path, make_context: MakeContext) -> None:
    touch = [sys.executable, "-c", TOUCH_LATER]
    outcome = await LocalProcess().create(
        make_context(), props(touch, startup_check_secs=None, ready_file="up.flag")
    )
    assert (root / "up.flag").exists()
    assert procfs.read(outcome.data["pid"]) is not None


TOUCH_LATER = (
    "import pathlib, time\n"
    "time.sleep(0.3)\n"
    "pathlib.Path('up.flag').touch()\n"
    "while True: time.sleep(1)\n"
)


async def test_without_a_readiness_check_a_slow_failure_is_still_caught(
    make_context: MakeContext,
) -> None:
    # Fails after 0.6 s, as an interpreter importing a server does on a busy machine: the
    # default minimum uptime is long enough to see it (the old 0.2 s was not).
    late = [sys.executable, "-c", "import time, sys; time.sleep(0.6); print('late'); sys.exit(1)"]
    with pytest.raises(PermanentFailure, match=r"exited during startup.*late"):
        await LocalProcess().create(make_context(), props(late, startup_check_secs=None))


def test_nul_bytes_in_command_or_environment_are_refused_naming_the_property(root: Path) -> None:
    ctx = ValidationContext(allowed_roots=(root,))
    problems = dict(
        LocalProcess().validate(
            {"command": ["python3", "-c", "print(1)\0"], "environment": {"A": "x\0y"}}, ctx
        )
    )
    assert problems["command"] == "item 2 contains a NUL byte, which no process can receive"
    assert problems["environment"] == (
        "A: the value contains a NUL byte, which no process can receive"
    )


async def test_a_nul_byte_known_only_at_create_fails_clearly(make_context: MakeContext) -> None:
    with pytest.raises(PermanentFailure, match=r"res: command: item 1 contains a NUL byte"):
        await LocalProcess().create(make_context(), props([sys.executable, "-c\0"]))
