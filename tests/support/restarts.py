"""Restarting the real RabbitMQ and PostgreSQL servers the tests use (this machine's).

A test that restarts a server must leave it running for the rest of the session, whatever
happens in the test: ``ensure_running`` starts it if needed and returns once it accepts
clients again. These tests run in CI (``CI=true``), where the server's control tool must
work (else they fail). Elsewhere they are skipped: on a developer's machine the servers
are shared with whatever else runs there (other test runs would see them go away).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import psycopg
import pytest

AMQP_URL = os.environ.get("CONVERGE_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
PG_ADMIN_URL = os.environ.get("CONVERGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").lower() == "true"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")
READY_TIMEOUT = 90.0


@dataclass(frozen=True)
class ServerControl:
    """Stop and start one server; ``accepts`` says whether it serves clients now."""

    name: str
    stop_command: Sequence[str]
    start_command: Sequence[str]
    accepts: Callable[[], bool]
    # Seconds with the server down: clients see it refuse, not merely drop them.
    down_for: float = 1.0

    def restart(self) -> None:
        _run(self.stop_command)
        time.sleep(self.down_for)
        _run(self.start_command)
        self.wait_until_ready()

    def ensure_running(self) -> None:
        if not self.accepts():
            _run(self.start_command, check=False)  # may be starting already
        self.wait_until_ready()

    def wait_until_ready(self) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while not self.accepts():
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} does not accept clients {READY_TIMEOUT} s on")
            time.sleep(0.2)


def broker_control() -> ServerControl:
    """The local RabbitMQ node's application, stopped and started by ``rabbitmqctl``: every
    connection is dropped, durable queues and persistent messages are kept."""
    _only_in_ci()
    where = urlsplit(AMQP_URL)
    host, port = where.hostname or "127.0.0.1", where.port or 5672
    if host not in LOCAL_HOSTS:
        _unavailable(f"the test broker {host} is not this machine's")
    tool = _tool("rabbitmqctl")
    _probe([tool, "-q", "status"], "rabbitmqctl cannot control the local node")
    return ServerControl(
        "RabbitMQ",
        [tool, "-q", "stop_app"],
        [tool, "-q", "start_app"],
        lambda: amqp_accepts(host, port),
    )


def database_control() -> ServerControl:
    """The local PostgreSQL cluster serving the tests, restarted by ``pg_ctlcluster`` (fast
    shutdown: every session is ended)."""
    _only_in_ci()
    where = urlsplit(PG_ADMIN_URL)
    host, port = where.hostname or "127.0.0.1", where.port or 5432
    if host not in LOCAL_HOSTS:
        _unavailable(f"the test database server {host} is not this machine's")
    tool = _tool("pg_ctlcluster")
    listed = _probe([_tool("pg_lsclusters"), "-h"], "pg_lsclusters failed")
    clusters = [line.split() for line in listed.splitlines()]
    found = [fields[:2] for fields in clusters if len(fields) > 2 and fields[2] == str(port)]
    if not found:
        _unavailable(f"no local PostgreSQL cluster listens on port {port}")
    version, name = found[0]
    control = [tool, "--skip-systemctl-redirect", version, name]
    return ServerControl(
        "PostgreSQL",
        [*control, "stop", "-m", "fast"],
        [*control, "start"],
        lambda: database_accepts(PG_ADMIN_URL),
    )


def amqp_accepts(host: str, port: int) -> bool:
    """Whether the broker answers an AMQP 0-9-1 greeting with its first frame
    (connection.start): listening is not enough while it boots."""
    try:
        with socket.create_connection((host, port), timeout=2) as conn:
            conn.settimeout(3)
            conn.sendall(b"AMQP\x00\x00\x09\x01")
            return conn.recv(1) == b"\x01"  # a method frame
    except OSError:
        return False


def database_accepts(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def _tool(name: str) -> str:
    found = shutil.which(name) or next(
        (path for path in (f"/usr/sbin/{name}", f"/usr/bin/{name}") if os.access(path, os.X_OK)),
        None,
    )
    if found is None:
        _unavailable(f"{name} is not installed here")
    assert found is not None
    return found


def _probe(command: Sequence[str], failure: str) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _unavailable(f"{failure}: {exc}")
        raise  # not reached
    if done.returncode != 0:
        _unavailable(f"{failure}: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def _run(command: Sequence[str], *, check: bool = True) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(command)} exited {done.returncode}: {done.stderr}")


def _only_in_ci() -> None:
    if not IN_CI:
        pytest.skip("restarts a server this machine shares: runs with CI=true")


def _unavailable(reason: str) -> None:
    if IN_CI:
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)
