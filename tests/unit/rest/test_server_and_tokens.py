"""Serving rules and token storage: --noauth only on loopback, addresses, hashed tokens."""

from __future__ import annotations

import asyncio
import socket
import sqlite3
import time
from pathlib import Path

import pytest

from converge.api import Converge
from converge.errors import InvalidRequest, NotFound
from converge.rest.server import is_loopback, parse_address, serving_api


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("example.org", False),
    ],
)
def test_loopback_addresses(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_addresses_parse_with_and_without_host() -> None:
    assert parse_address("127.0.0.1:8004") == ("127.0.0.1", 8004)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    assert parse_address("8004") == ("127.0.0.1", 8004)
    with pytest.raises(InvalidRequest, match="HOST:PORT"):
        parse_address("127.0.0.1:http")


async def test_noauth_is_refused_off_loopback(tmp_path: Path) -> None:
    async with Converge.embedded(tmp_path / "state.db") as cv:
        with pytest.raises(InvalidRequest, match=r"refused on 0\.0\.0\.0"):
            async with serving_api(cv, "0.0.0.0", 0, noauth=True):
                pytest.fail("served without authentication on every address")


async def test_tokens_are_stored_hashed_and_revocable(tmp_path: Path) -> None:
    state = tmp_path / "state.db"
    async with Converge.embedded(state) as cv:
        secret, record = await cv.create_token("alpha", "reader", "ci")
        assert len(secret) >= 40
        found = await cv.authenticate(secret)
        assert found is not None and (found.project_id, found.role) == ("alpha", "reader")
        assert await cv.authenticate(secret + "x") is None
        with pytest.raises(InvalidRequest, match="invalid role"):
            await cv.create_token("alpha", "owner")
        with pytest.raises(InvalidRequest, match="invalid project"):
            await cv.create_token("a/b")
        await cv.revoke_token(record.id)
        assert await cv.authenticate(secret) is None
        with pytest.raises(NotFound, match="no live token"):
            await cv.revoke_token(record.id)
        listed = await cv.list_tokens("alpha")
        assert [t.id for t in listed] == [record.id] and listed[0].is_revoked
    stored = sqlite3.connect(state).execute("SELECT * FROM api_token").fetchall()
    assert stored and not any(secret in str(row) for row in stored)


def _keep_alive_round_trips(port: int, count: int) -> list[float]:
    """Seconds for each of ``count`` requests sent one after another on one connection."""
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            started = time.perf_counter()
            conn.sendall(b"GET / HTTP/1.1\r\nHost: test\r\n\r\n")
            received = b""
            while not received.endswith(b"}]}"):  # the versions document's last bytes
                chunk = conn.recv(65536)
                assert chunk, "the server closed the connection"
                received += chunk
            times.append(time.perf_counter() - started)
    return times


async def test_keep_alive_responses_are_not_held_back_by_nagle(tmp_path: Path) -> None:
    # With Nagle's algorithm on the server's sockets, a response's body (its second
    # write) waited for the client's delayed ACK: every request after a connection's
    # first took 40 ms or more, however fast the server was.
    async with (
        Converge.embedded(tmp_path / "state.db") as cv,
        serving_api(cv, "127.0.0.1", 0, noauth=True) as (_, port),
    ):
        times = await asyncio.to_thread(_keep_alive_round_trips, port, 6)
    assert min(times[1:]) < 0.03, [round(t * 1000, 1) for t in times]
