"""``converge serve --workers N``: N worker processes, kept running while serve runs.

Each is ``converge serve --roles worker`` over the same state and broker, handed over in
its environment (``CONVERGE_STATE``, ``CONVERGE_BROKER``: never on a command line, where
any user's ``ps`` would show a password). A worker that exits while serve runs is started
again after a pause: 1 s, doubling up to 30 s while it keeps dying young (a crash loop).
On stop, each gets SIGTERM (it finishes nothing half-way: what it had not acknowledged
goes back to the broker), then SIGKILL after ``stop_timeout``. Workers run in their own
session, so a terminal's Ctrl-C reaches serve alone, which stops them; and each one stops
by itself when serve is gone (``--parent-pid``), even when serve was killed with SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Mapping, Sequence

log = logging.getLogger("converge.cli.workers")

_PROGRAM = "from converge.cli.main import main; main()"
FIRST_PAUSE = 1.0
LONGEST_PAUSE = 30.0
# A worker that lived this long had started (imports, connections, its service row take a
# second or two) and then died of something else than starting: a kill, the OOM killer.
STARTED_AFTER = 5.0


def restart_pause(pause: float, lived: float) -> float:
    """How long to wait before starting again a worker that lived ``lived`` seconds, when
    ``pause`` is the next pause of its backoff: the first pause again when it lived long
    enough to have started, so only a worker that keeps dying young (a crash loop) backs
    off. A fixed age of 60 s kept workers killed every few seconds (a chaos run, an OOM
    killer) down for 30 s each time, their work waiting on the broker; so did a rule
    asking a worker to outlive its last pause, as a longer pause made a longer life
    needed to come back from it."""
    return FIRST_PAUSE if lived >= STARTED_AFTER else pause


class WorkerPool:
    """Runs ``count`` worker processes until ``stop``; ``environment`` is theirs, whole."""

    def __init__(
        self,
        count: int,
        environment: Mapping[str, str],
        arguments: Sequence[str] = (),
        *,
        stop_timeout: float = 10.0,
    ) -> None:
        self.count = count
        self._environment = dict(environment)
        self._arguments = list(arguments)
        self._stop_timeout = stop_timeout
        self._processes: dict[int, asyncio.subprocess.Process] = {}
        self._keepers: list[asyncio.Task[None]] = []
        self._stopping = False

    async def start(self) -> None:
        for index in range(self.count):
            await self._spawn(index)
            self._keepers.append(
                asyncio.create_task(self._keep(index), name=f"converge-worker-keeper-{index}")
            )

    async def _spawn(self, index: int) -> None:
        command = [
            sys.executable,
            "-c",
            _PROGRAM,
            "serve",
            "--roles",
            "worker",
            "--parent-pid",
            str(os.getpid()),
            *self._arguments,
        ]
        process = await asyncio.create_subprocess_exec(
            *command,
            env=self._environment,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        self._processes[index] = process
        log.info("worker process started", extra={"worker": index, "pid": process.pid})

    async def _keep(self, index: int) -> None:
        """Start worker ``index`` again whenever it exits while the pool runs."""
        loop = asyncio.get_running_loop()
        pause = FIRST_PAUSE
        while True:
            started = loop.time()
            process = self._processes[index]
            code = await process.wait()
            if self._stopping:
                return
            pause = restart_pause(pause, loop.time() - started)
            log.warning(
                "worker process exited: starting it again",
                extra={"worker": index, "pid": process.pid, "code": code, "pause": pause},
            )
            await asyncio.sleep(pause)
            if self._stopping:
                return
            pause = min(pause * 2, LONGEST_PAUSE)
            await self._spawn(index)

    async def stop(self) -> None:
        """SIGTERM every worker, SIGKILL what is left after ``stop_timeout``; wait for all."""
        self._stopping = True
        for task in self._keepers:
            task.cancel()
        await asyncio.gather(*self._keepers, return_exceptions=True)
        running = [p for p in self._processes.values() if p.returncode is None]
        for process in running:
            _signal(process, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in running)), self._stop_timeout)
        except TimeoutError:
            for p in running:
                if p.returncode is None:
                    log.warning("worker process did not stop: killing it", extra={"pid": p.pid})
                    _signal(p, signal.SIGKILL)
            await asyncio.gather(*(p.wait() for p in running))


def _signal(process: asyncio.subprocess.Process, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signum)
