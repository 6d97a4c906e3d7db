"""`converge token create` and `converge api` as a user runs them: a real process serving on
a free port, tokens required, stopped by SIGTERM."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from click.testing import CliRunner

from converge.cli.main import main

CONVERGE = str(Path(sys.executable).with_name("converge"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_converge_api_serves_with_tokens_and_stops_on_sigterm(tmp_path: Path) -> None:
    state = str(tmp_path / "state.db")
    created = CliRunner().invoke(
        main, ["token", "create", "--project", "alpha", "--state", state, "-f", "json"]
    )
    assert created.exit_code == 0, created.output
    token = json.loads(created.output)["token"]
    listed = CliRunner().invoke(main, ["token", "list", "--state", state, "-f", "json"])
    assert [t["project_id"] for t in json.loads(listed.output)] == ["alpha"]
    assert token not in listed.output  # the secret is shown once, at creation
    port = free_port()
    server = subprocess.Popen(
        [CONVERGE, "api", f"127.0.0.1:{port}", "--state", state],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}/v1/alpha/stacks"
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = httpx.get(url, headers={"X-Auth-Token": token}, timeout=5)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stderr.read() if server.stderr else ""
                assert time.monotonic() < deadline, "converge api did not start"
                time.sleep(0.2)
        assert answer.status_code == 200 and answer.json() == {"stacks": []}
        assert httpx.get(url, timeout=5).status_code == 401
    finally:
        server.send_signal(signal.SIGTERM)
        _, errors = server.communicate(timeout=30)
    assert server.returncode == 0, errors
    assert "tokens required" in errors and "converge serve stopped" in errors


def test_noauth_off_loopback_is_refused_by_the_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["api", "0.0.0.0:0", "--noauth", "--state", str(tmp_path / "state.db")]
    )
    assert result.exit_code == 2
    assert "--noauth serves without authentication and is refused on 0.0.0.0" in result.output
