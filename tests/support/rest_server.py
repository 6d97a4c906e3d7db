"""A converge REST server in a thread of its own (engine, store and uvicorn on its loop), so
tests drive it with synchronous clients (python-heatclient, the openstack CLI) over a real
socket on 127.0.0.1."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx

from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.rest.server import serving_api

T = TypeVar("T")

FAST = EngineSettings(sweep_interval=0.1, heartbeat_interval=0.5)


class RestServer:
    """The running server: its URL, and a way to run coroutines on its converge."""

    def __init__(self, loop: asyncio.AbstractEventLoop, cv: Converge, url: str) -> None:
        self.loop = loop
        self.cv = cv
        self.url = url  # http://127.0.0.1:PORT
        # One client for the test's own requests: making one costs an SSL context. Idle
        # connections are dropped well before uvicorn closes them (after 5 s): a request
        # sent on one the server is closing at that moment fails with a reset.
        self.http = httpx.Client(timeout=20, limits=httpx.Limits(keepalive_expiry=2.0))

    def run(self, make: Callable[[Converge], Coroutine[Any, Any, T]]) -> T:
        return asyncio.run_coroutine_threadsafe(make(self.cv), self.loop).result(30)

    def token(self, project: str, role: str = "member") -> str:
        secret, _ = self.run(lambda cv: cv.create_token(project, role))
        return secret

    def endpoint(self, project: str) -> str:
        return f"{self.url}/v1/{project}"


@contextmanager
def rest_server(
    state: Path, *, noauth: bool = False, settings: EngineSettings = FAST, observe: bool = False
) -> Iterator[RestServer]:
    """``observe`` also runs the synchronizer and drift handling (as ``converge serve``)."""
    ready: list[RestServer] = []
    failure: list[BaseException] = []
    stop: list[asyncio.Event] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        async with (
            Converge.embedded(state, settings=settings) as cv,
            serving_api(cv, "127.0.0.1", 0, noauth=noauth) as (host, port),
        ):
            ready.append(RestServer(asyncio.get_running_loop(), cv, f"http://{host}:{port}"))
            if observe:
                async with cv.serving():
                    await stop[0].wait()
            else:
                await stop[0].wait()

    def thread_main() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # reported to the test
            failure.append(exc)

    thread = threading.Thread(target=thread_main, name="converge-rest-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not ready and not failure and time.monotonic() < deadline:
        time.sleep(0.01)
    if failure:
        raise failure[0]
    if not ready:
        raise RuntimeError("the REST server did not start in 30 s")
    server = ready[0]
    try:
        yield server
    finally:
        server.http.close()
        server.loop.call_soon_threadsafe(stop[0].set)
        thread.join(30)
        if failure:
            raise failure[0]


def wait_for(check: Callable[[], bool], timeout: float = 20.0, interval: float = 0.05) -> None:
    """Wait for a condition instead of sleeping a fixed time."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(interval)
