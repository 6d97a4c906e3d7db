"""A converge REST server for tests driven with synchronous clients (python-heatclient,
the openstack CLI) over a real socket on 127.0.0.1.

Embedded: engine, store and uvicorn in a thread of the test's process, on their own loop.
Distributed: ``converge serve --roles engine,observer --api 127.0.0.1:0`` and ``converge
serve --roles worker --workers 2`` over PostgreSQL and RabbitMQ, the deployment that
docs/deploy.md describes; the test's process keeps a handle of its own on the same database
and broker (tokens, direct reads), in a thread as in the embedded mode.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.rest.server import serving_api
from support.distributed import Deployment, Serve

T = TypeVar("T")

FAST = EngineSettings(sweep_interval=0.1, heartbeat_interval=0.5)
# The modes a parametrized server fixture runs in; the distributed one needs the services.
MODES = (
    pytest.param("embedded"),
    pytest.param("distributed", marks=(pytest.mark.postgres, pytest.mark.rabbitmq)),
)


class RestServer:
    """The running server: its URL, and a way to run coroutines on a converge handle over
    its state. ``project(name)`` is the project a test's ``name`` stands for: a shared
    distributed server gives each test projects of its own (``alpha-3f2a…``)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        cv: Converge,
        url: str,
        *,
        mode: str = "embedded",
        project_suffix: str = "",
    ) -> None:
        self.loop = loop
        self.cv = cv
        self.url = url  # http://127.0.0.1:PORT
        self.mode = mode
        self.project_suffix = project_suffix
        # One client for the test's own requests: making one costs an SSL context. Idle
        # connections are dropped well before uvicorn closes them (after 5 s): a request
        # sent on one the server is closing at that moment fails with a reset.
        self.http = httpx.Client(timeout=20, limits=httpx.Limits(keepalive_expiry=2.0))

    def run(self, make: Callable[[Converge], Coroutine[Any, Any, T]]) -> T:
        return asyncio.run_coroutine_threadsafe(make(self.cv), self.loop).result(30)

    def project(self, name: str) -> str:
        return name + self.project_suffix

    def token(self, project: str, role: str = "member") -> str:
        secret, _ = self.run(lambda cv: cv.create_token(self.project(project), role))
        return secret

    def endpoint(self, project: str) -> str:
        return f"{self.url}/v1/{self.project(project)}"

    def close(self) -> None:
        self.http.close()


@contextmanager
def converge_thread(
    open_handle: Callable[[], AbstractAsyncContextManager[T]],
) -> Iterator[tuple[asyncio.AbstractEventLoop, T]]:
    """What ``open_handle`` opens, kept open on an event loop in a thread of its own until
    the block ends: synchronous tests reach it with ``run_coroutine_threadsafe``."""
    ready: list[tuple[asyncio.AbstractEventLoop, T]] = []
    failure: list[BaseException] = []
    stop: list[asyncio.Event] = []

    async def main() -> None:
        stop.append(asyncio.Event())
        async with open_handle() as opened:
            ready.append((asyncio.get_running_loop(), opened))
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
        raise RuntimeError("the converge handle did not open in 30 s")
    loop, opened = ready[0]
    try:
        yield loop, opened
    finally:
        loop.call_soon_threadsafe(stop[0].set)
        thread.join(30)
        if failure:
            raise failure[0]


@contextmanager
def rest_server(
    state: Path, *, noauth: bool = False, settings: EngineSettings = FAST, observe: bool = False
) -> Iterator[RestServer]:
    """The embedded server over ``state``; ``observe`` also runs the synchronizer and drift
    handling (as ``converge serve``)."""

    @asynccontextmanager
    async def serving() -> AsyncIterator[tuple[Converge, str]]:
        async with (
            Converge.embedded(state, settings=settings) as cv,
            serving_api(cv, "127.0.0.1", 0, noauth=noauth) as (host, port),
        ):
            if observe:
                async with cv.serving():
                    yield cv, f"http://{host}:{port}"
            else:
                yield cv, f"http://{host}:{port}"

    with converge_thread(serving) as (loop, (cv, url)):
        server = RestServer(loop, cv, url)
        try:
            yield server
        finally:
            server.close()


@dataclass
class RestDeployment:
    """A distributed deployment serving the API, shared by the tests of a session: each
    test gets a ``RestServer`` on it with projects of its own (``server()``)."""

    deployment: Deployment
    api: Serve
    url: str
    loop: asyncio.AbstractEventLoop
    cv: Converge

    @contextmanager
    def server(self) -> Iterator[RestServer]:
        server = RestServer(
            self.loop,
            self.cv,
            self.url,
            mode="distributed",
            project_suffix=f"-{uuid.uuid4().hex[:8]}",
        )
        try:
            yield server
        finally:
            server.close()
        # The API process must still be up: a crash would otherwise surface as a
        # connection error in whichever test comes next.
        assert self.api.process.poll() is None, self.api.log.read_text()


_LISTENING = re.compile(r"Heat API on (http://[\d.]+:\d+)/v1/")


@contextmanager
def distributed_rest_deployment(deployment: Deployment) -> Iterator[RestDeployment]:
    """Two worker processes, and the engine and observer roles serving the API in another
    (its port chosen by the system, read from what it prints), all started as a user would."""
    deployment.serve("--roles", "worker", "--workers", "2")
    deployment.wait_for("worker", 2)
    api = deployment.serve("--roles", "engine,observer", "--api", "127.0.0.1:0")
    url = wait_for_listening(api)
    # The checks can only be the worker processes' work: the API's process has no share.
    assert sorted(roles for _, roles in deployment.services()) == [
        ("engine", "observer"),
        ("worker",),
        ("worker",),
    ]

    def handle() -> AbstractAsyncContextManager[Converge]:
        # Like a command's: no role of its own, the processes above do the work.
        return Converge.open(
            deployment.database_url,
            broker_url=deployment.broker_url,
            broker_namespace=deployment.namespace,
            roles=(),
        )

    with converge_thread(handle) as (loop, cv):
        yield RestDeployment(deployment, api, url, loop, cv)
    for serve in deployment.serving:
        serve.stop()


def wait_for_listening(api: Serve, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while True:
        found = _LISTENING.search(api.log.read_text())
        if found:
            return found.group(1)
        if api.process.poll() is not None:
            raise AssertionError(f"converge serve --api exited:\n{api.log.read_text()}")
        if time.monotonic() > deadline:
            raise AssertionError(f"converge serve --api not listening in {timeout} s")
        time.sleep(0.05)


def wait_for(check: Callable[[], bool], timeout: float = 20.0, interval: float = 0.05) -> None:
    """Wait for a condition instead of sleeping a fixed time."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(interval)


@contextmanager
def rest_server_in(
    mode: str, request: pytest.FixtureRequest, state: Path, *, observe: bool = False
) -> Iterator[RestServer]:
    """A server in ``mode`` for a parametrized fixture: ``embedded`` over ``state``, or on
    the session's distributed deployment (the ``rest_deployment`` fixture, which skips when
    PostgreSQL or RabbitMQ is absent and fails under CI=true); it always observes."""
    if mode == "embedded":
        with rest_server(state, observe=observe) as running:
            yield running
        return
    shared: RestDeployment = request.getfixturevalue("rest_deployment")
    with shared.server() as running:
        yield running
