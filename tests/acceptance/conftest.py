"""Acceptance fixtures: a converge in a temporary directory over a recorded world, embedded
or distributed (PostgreSQL, RabbitMQ and worker processes): the tests of ``cv`` run in both."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.builtin import world
from converge.resources.registry import PluginRegistry, default_registry
from support.amqp import delete_namespace
from support.databases import fresh_database
from support.distributed import Deployment
from support.rest_server import RestDeployment, distributed_rest_deployment
from support.world import FAST, Reality, WorldThing


@pytest.fixture
def reality() -> Reality:
    return Reality()


@pytest.fixture
def registry(reality: Reality) -> PluginRegistry:
    registry = default_registry()

    class BoundThing(WorldThing):
        def __init__(self) -> None:
            super().__init__(reality)

    registry.register(BoundThing, type_name="Test::Thing")
    return registry


MODES = ("embedded", "distributed")
# In-process-only things a test may ask for: the in-memory Reality behind Test::Thing lives
# in the test's process, where no worker process can reach it.
_IN_PROCESS_ONLY = frozenset({"reality", "registry"})


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "embedded_only(reason): a test of `cv` that cannot run with worker processes",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test of the ``cv`` handle runs in both modes, unless it needs what lives in
    the test's own process (``reality``, ``registry``) or says why it cannot."""
    if "mode" not in metafunc.fixturenames:  # no ``cv``, or a module's own ``cv``
        return
    own = set(inspect.signature(metafunc.function).parameters)
    if own & _IN_PROCESS_ONLY or metafunc.definition.get_closest_marker("embedded_only"):
        return
    metafunc.parametrize("mode", MODES)


@pytest.fixture
def mode() -> str:
    """How ``cv`` runs: ``embedded`` (one process) or ``distributed`` (see ``cluster``)."""
    return "embedded"


@dataclass(frozen=True)
class Cluster:
    """The distributed mode's shared part: a database, a broker namespace and two worker
    processes (``converge serve --roles worker --workers 2``), for the whole session."""

    deployment: Deployment
    settings: EngineSettings


@pytest.fixture(scope="session")
def cluster(
    postgres_server: str, rabbitmq_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """Started once: each test gets a project of its own in it (its stack names cannot
    clash), and its own engine in the test process. Local::* paths may lie anywhere under
    the session's temporary directory, where every ``tmp_path`` is."""
    namespace = f"converge-test-{uuid.uuid4().hex[:10]}"
    root = tmp_path_factory.getbasetemp()
    with fresh_database(postgres_server) as database_url:
        shared = Deployment(database_url, rabbitmq_url, namespace, root)
        try:
            shared.serve("--roles", "worker", "--workers", "2")
            shared.wait_for("worker", 2)
            settings = dataclasses.replace(
                FAST,
                # The sweeper cannot see checks running in the worker processes: at FAST's
                # 0.1 s it would count every check longer than two sweeps as a lost trigger.
                sweep_interval=5.0,
                allowed_roots=(root,),
                plugin_settings={world.SETTING: str(root / "world.db")},
            )
            yield Cluster(shared, settings)
            for serve in shared.serving:
                serve.stop()
        finally:
            shared.stop_all()
            asyncio.run(delete_namespace(rabbitmq_url, namespace, hosts=(socket.gethostname(),)))


@pytest.fixture
async def cv(mode: str, tmp_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Converge]:
    """The handle a test drives: embedded over a file, or the engine role in this process
    with the cluster's worker processes doing the checks."""
    if mode == "embedded":
        registry = request.getfixturevalue("registry")
        async with Converge.embedded(
            tmp_path / "state.db", settings=FAST, registry=registry
        ) as handle:
            yield handle
        return
    shared: Cluster = request.getfixturevalue("cluster")
    async with Converge.open(
        shared.deployment.database_url,
        settings=shared.settings,
        broker_url=shared.deployment.broker_url,
        broker_namespace=shared.deployment.namespace,
        roles=("engine",),
    ) as handle:
        yield handle.for_project(f"test-{uuid.uuid4().hex[:12]}")
        # Every trigger crossed the broker and the worker processes: none was lost.
        assert handle.engine.sweeper_rescues == 0, "the sweeper had to re-send lost work"


@pytest.fixture
def deployment(postgres_url: str, rabbitmq_url: str, tmp_path: Path) -> Iterator[Deployment]:
    """A fresh PostgreSQL database and broker namespace for processes started by the test."""
    namespace = f"converge-test-{uuid.uuid4().hex[:10]}"
    shared = Deployment(postgres_url, rabbitmq_url, namespace, tmp_path)
    try:
        yield shared
    finally:
        shared.stop_all()
        asyncio.run(delete_namespace(rabbitmq_url, namespace, hosts=(socket.gethostname(),)))


@pytest.fixture(scope="session")
def rest_deployment(
    postgres_server: str, rabbitmq_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RestDeployment]:
    """The REST API served by ``converge serve`` processes over PostgreSQL and RabbitMQ,
    started once; each test's ``RestServer`` on it has projects of its own."""
    namespace = f"converge-test-{uuid.uuid4().hex[:10]}"
    root = tmp_path_factory.mktemp("rest-distributed")
    with fresh_database(postgres_server) as database_url:
        shared = Deployment(database_url, rabbitmq_url, namespace, root)
        try:
            with distributed_rest_deployment(shared) as running:
                yield running
        finally:
            shared.stop_all()
            asyncio.run(delete_namespace(rabbitmq_url, namespace, hosts=(socket.gethostname(),)))
