"""Chaos: a stack of 500 real and waiting resources created, updated with replacements and
rolled back over PostgreSQL and RabbitMQ while a random worker or engine process is
killed with SIGKILL every few seconds. After each operation reality equals the template:
no file or test-world thing leaked or made twice, one row per resource."""

from __future__ import annotations

import pytest

from support.chaos import Generation, Killer, Shape, apply, differences, start_cluster
from support.distributed import Deployment

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

SHAPE = Shape(files=150, tests=150, nones=200, wait_secs=1.0, depth=5)


# Three operations under kills take 40 to 130 s on this 2-core machine (work a dead
# worker continued itself waits for a sweep; a worker killed within 5 s of its start
# restarts after a longer pause): more than the suite's default 120 s limit at times.
@pytest.mark.timeout(300)
def test_create_update_and_rollback_survive_killed_processes(deployment: Deployment) -> None:
    start_cluster(deployment)

    def applied(generation: Generation, *options: str) -> int:
        done = apply(deployment, "chaos", SHAPE, generation, *options)
        print(f"generation {generation.number}: exit {done.returncode}", done.stderr[-2000:])
        return done.returncode

    with Killer(deployment, interval=2.0, seed=16) as killer:
        assert applied(Generation(1)) == 0
        assert differences(deployment, "chaos", SHAPE, Generation(1), "CREATE_COMPLETE") == []
        assert applied(Generation(2)) == 0
        assert differences(deployment, "chaos", SHAPE, Generation(2), "UPDATE_COMPLETE") == []
        assert applied(Generation(3, fail=True), "--rollback") == 1
        assert differences(deployment, "chaos", SHAPE, Generation(2), "ROLLBACK_COMPLETE") == []
    assert len(killer.kills) >= 5, killer.kills
    # The work a killed process held moved on well within twice the heartbeat timeout
    # (on this host a dead process is known at once, not after its heartbeat goes stale).
    held = [kill for kill in killer.kills if kill.claimed]
    assert all(kill.resumed_after is not None and kill.resumed_after < 60 for kill in held), held
    print(f"{len(killer.kills)} kills; resumed after", [kill.resumed_after for kill in held])
