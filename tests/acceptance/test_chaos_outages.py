"""Outages mid-operation over PostgreSQL and RabbitMQ: every connection to the broker
dropped (and refused for a while), every database connection terminated, the real broker
and the real database server restarted. The operation completes once they are back, and
reality equals the template: nothing lost, nothing leaked or made twice."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import psycopg
import pytest

from support.chaos import Generation, Shape, differences, template, wait_for_progress
from support.distributed import Deployment
from support.proxy import threaded_link
from support.restarts import ServerControl, broker_control, database_control

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

SHAPE = Shape(files=50, tests=50, nones=60, wait_secs=1.0, depth=4)


def _operations_survive(
    deployment: Deployment, outage: Callable[[], None], shape: Shape = SHAPE
) -> None:
    """Create, then update with replacements, each with ``outage`` once it is under way."""
    root = deployment.directory
    (root / "files").mkdir()
    deployment.serve("--roles", "engine")
    deployment.serve("--roles", "worker", "--workers", "2")
    deployment.wait_for("worker", 2)
    deployment.wait_for("engine", 1)
    for generation, status in (
        (Generation(1), "CREATE_COMPLETE"),
        (Generation(2), "UPDATE_COMPLETE"),
    ):
        (root / "stack.yaml").write_text(template(shape, generation, root))
        started = time.time()
        with deployment.start_converge("apply", "stack.yaml", "--name", "outage") as applying:
            wait_for_progress(deployment, "outage", started, done=20)
            outage()
            _, err = applying.communicate(timeout=120)
        assert applying.returncode == 0, err
        assert differences(deployment, "outage", shape, generation, status) == []


def test_operations_complete_after_the_broker_went_away(deployment: Deployment) -> None:
    broker = urlsplit(deployment.broker_url)
    with threaded_link((broker.hostname or "127.0.0.1", broker.port or 5672)) as link:
        deployment.broker_url = deployment.broker_url.replace(f":{broker.port}", f":{link.port}")

        def broker_away() -> None:
            link.down()  # every connection dropped, new ones refused
            time.sleep(3)
            link.up()

        _operations_survive(deployment, broker_away)


def test_operations_complete_after_database_connections_were_dropped(
    deployment: Deployment,
) -> None:
    def connections_dropped() -> None:
        for _ in range(3):
            with psycopg.connect(deployment.database_url, autocommit=True) as conn:
                dropped = conn.execute(
                    "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM "
                    "pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid()) AS terminated"
                ).fetchone()
            assert dropped is not None and dropped[0] > 0
            time.sleep(1)

    _operations_survive(deployment, connections_dropped)


# Each restart takes seconds: a smaller stack keeps the test under ~40 s.
RESTART_SHAPE = Shape(files=30, tests=30, nones=40, wait_secs=1.0, depth=4)


@pytest.fixture
def broker() -> Iterator[ServerControl]:
    """The local RabbitMQ server's control; running again (and accepting AMQP) after the
    test whatever happened in it."""
    control = broker_control()
    try:
        yield control
    finally:
        control.ensure_running()


@pytest.fixture
def database_server() -> Iterator[ServerControl]:
    control = database_control()
    try:
        yield control
    finally:
        control.ensure_running()


def test_operations_complete_after_the_broker_restarted(
    deployment: Deployment, broker: ServerControl
) -> None:
    """The real broker stops (every connection dropped, nothing accepted) and starts again
    with its durable queues: the serving processes reconnect and finish the work."""
    _operations_survive(deployment, broker.restart, RESTART_SHAPE)
    workers = deployment.serving[1].log.read_text()
    assert "CONNECTION_FORCED" in workers  # the restart did reach them mid-operation


def test_operations_complete_after_the_database_server_restarted(
    deployment: Deployment, database_server: ServerControl
) -> None:
    """PostgreSQL restarts (a fast shutdown: every session ended, nothing accepted until it
    is up again): the processes ride it out on fresh connections."""
    _operations_survive(deployment, database_server.restart, RESTART_SHAPE)
