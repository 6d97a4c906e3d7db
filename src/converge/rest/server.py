"""Serving the REST application with uvicorn, inside an already running event loop.

The caller owns signals and shutdown (``converge serve`` stops on SIGINT/SIGTERM, tests on
their own event), so uvicorn's own signal capture is turned off.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import AsyncIterator, Iterator

import uvicorn

from converge.api import Converge
from converge.errors import InvalidRequest
from converge.rest.app import create_app


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8004`` for IPv6) or ``PORT`` alone (on 127.0.0.1)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidRequest(f"invalid address {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8004")
    return host, int(port)


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield  # the caller handles signals


@contextlib.asynccontextmanager
async def serving_api(
    cv: Converge, host: str, port: int, *, noauth: bool = False
) -> AsyncIterator[tuple[str, int]]:
    """Serve the API while the block runs; yields the bound (host, port) (port 0: a free one).

    ``noauth`` is refused unless ``host`` is a loopback address: without tokens anyone who
    can reach the port could change every stack.
    """
    if noauth and not is_loopback(host):
        raise InvalidRequest(
            f"--noauth serves without authentication and is refused on {host}: use a "
            "loopback address (127.0.0.1, ::1) or create tokens with `converge token create`"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets whose proto says TCP, and accepted sockets take the listener's. With it on,
    # a response's body waited for the client's delayed ACK: +40 ms on every request after
    # a keep-alive connection's first.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidRequest(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    bound = sock.getsockname()[:2]
    config = uvicorn.Config(
        create_app(cv, noauth=noauth),
        log_level="warning",
        lifespan="off",
        timeout_graceful_shutdown=1,
        access_log=False,
    )
    server = _Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="converge-api")
    try:
        while not server.started:
            if task.done():
                task.result()
                raise InvalidRequest(f"the API server on {host}:{port} stopped at once")
            await asyncio.sleep(0.01)
        yield bound[0], bound[1]
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(task, 10)
        finally:
            sock.close()
