"""Outages mid-operation over PostgreSQL and RabbitMQ: every connection to the broker
dropped (and refused for a while), every database connection terminated. The operation
completes once they are back, and reality equals the template: nothing lost, nothing
leaked or made twice."""

from __future__ import annotations

import time
from collections.abc import Callable
from urllib.parse import urlsplit

import psycopg
import pytest

from support.chaos import Generation, Shape, differences, template, wait_for_progress
from support.distributed import Deployment
from support.proxy import threaded_link

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

SHAPE = Shape(files=50, tests=50, nones=60, wait_secs=1.0, depth=4)


def _operations_survive(deployment: Deployment, outage: Callable[[], None]) -> None:
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
        (root / "stack.yaml").write_text(template(SHAPE, generation, root))
        started = time.time()
        with deployment.start_converge("apply", "stack.yaml", "--name", "outage") as applying:
            wait_for_progress(deployment, "outage", started, done=20)
            outage()
            _, err = applying.communicate(timeout=120)
        assert applying.returncode == 0, err
        assert differences(deployment, "outage", SHAPE, generation, status) == []


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
