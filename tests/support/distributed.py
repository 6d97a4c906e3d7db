"""A distributed deployment for a test: one PostgreSQL database, one broker namespace, and
``converge serve`` processes started from the real command line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psycopg

PROGRAM = "from converge.cli.main import main\nmain()\n"


@dataclass
class Serve:
    """One ``converge serve`` process; its stderr goes to a file (read once it stopped)."""

    process: subprocess.Popen[str]
    log: Path
    stream: IO[str]

    def stop(self, timeout: float = 30.0) -> str:
        """SIGTERM, wait for it to exit cleanly, and return what it wrote to stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        finally:
            self.stream.close()
        text = self.log.read_text()
        assert code == 0, f"converge serve exited {code}:\n{text}"
        return text


@dataclass
class Deployment:
    """Where the processes of one test meet: the database, the broker namespace and a
    directory (the allowed root of Local::* types and the test world's file)."""

    database_url: str
    broker_url: str
    namespace: str
    directory: Path
    serving: list[Serve] = field(default_factory=list)

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")}
        env.update(
            PYTHONUNBUFFERED="1",
            CONVERGE_STATE=self.database_url,
            CONVERGE_BROKER=self.broker_url,
            CONVERGE_BROKER_NAMESPACE=self.namespace,
            CONVERGE_ALLOWED_ROOTS=str(self.directory),
            CONVERGE_TEST_WORLD=str(self.directory / "world.db"),
        )
        return env

    def converge(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run one ``converge`` command against the deployment."""
        return subprocess.run(
            [sys.executable, "-c", PROGRAM, *args],
            cwd=self.directory,
            env=self.environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def start_converge(self, *args: str) -> subprocess.Popen[str]:
        """Start one ``converge`` command, its output readable as it goes."""
        return subprocess.Popen(
            [sys.executable, "-c", PROGRAM, *args],
            cwd=self.directory,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def serve(self, *args: str) -> Serve:
        log = self.directory / f"serve-{len(self.serving)}.log"
        stream = log.open("w")
        process = subprocess.Popen(
            [sys.executable, "-c", PROGRAM, "serve", *args],
            cwd=self.directory,
            env=self.environment(),
            stdout=subprocess.DEVNULL,
            stderr=stream,
            text=True,
        )
        serve = Serve(process, log, stream)
        self.serving.append(serve)
        return serve

    def services(self) -> list[tuple[int, tuple[str, ...]]]:
        """(pid, roles) of every process registered in the database."""
        try:
            with psycopg.connect(self.database_url, connect_timeout=5) as conn:
                rows = conn.execute("SELECT pid, roles FROM service ORDER BY pid").fetchall()
        except psycopg.errors.UndefinedTable:
            return []  # no process has made the schema yet
        return [(pid, tuple(roles)) for pid, roles in rows]

    def wait_for(self, role: str, count: int, timeout: float = 60.0) -> list[int]:
        """The pids of ``count`` processes with ``role``, once they are registered."""
        deadline = time.monotonic() + timeout
        while True:
            pids = [pid for pid, roles in self.services() if role in roles]
            if len(pids) >= count:
                return pids
            for serve in self.serving:
                if serve.process.poll() is not None:
                    raise AssertionError(f"converge serve exited:\n{serve.log.read_text()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{count} {role} processes not registered in {timeout} s")
            time.sleep(0.1)

    def wait_for_new(self, role: str, before: list[int], timeout: float = 60.0) -> list[int]:
        """The live pids with ``role`` once one not in ``before`` replaced one that died."""
        deadline = time.monotonic() + timeout
        while True:
            pids = [pid for pid in self.wait_for(role, 1, timeout) if alive(pid)]
            if set(pids) - set(before) and len(pids) >= len(before):
                return pids
            if time.monotonic() > deadline:
                raise AssertionError(f"no new {role} process in {timeout} s")
            time.sleep(0.1)

    def stop_all(self) -> None:
        for serve in self.serving:
            if serve.process.poll() is None:
                serve.process.kill()
                serve.process.wait()
            serve.stream.close()


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts until it is reaped)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
