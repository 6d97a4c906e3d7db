"""``serve --workers N``'s pool: a worker that exits is started again, backing off only
while it keeps dying young (a crash loop), not when it is killed after it had started."""

from __future__ import annotations

import asyncio
import logging

import pytest

from converge.cli import worker_pool
from converge.cli.worker_pool import FIRST_PAUSE, LONGEST_PAUSE, STARTED_AFTER, restart_pause


def test_a_crash_loop_backs_off_up_to_the_longest_pause() -> None:
    pause, pauses = FIRST_PAUSE, []
    for _ in range(8):
        pause = restart_pause(pause, lived=0.5)
        pauses.append(pause)
        pause = min(pause * 2, LONGEST_PAUSE)
    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]


def test_a_worker_killed_after_it_started_comes_back_after_the_first_pause() -> None:
    """Killed every few seconds (a chaos run, an OOM killer): never down for long, even
    after a few young deaths made its pause long."""
    assert restart_pause(16.0, lived=STARTED_AFTER + 1) == FIRST_PAUSE
    assert restart_pause(LONGEST_PAUSE, lived=STARTED_AFTER) == FIRST_PAUSE
    assert restart_pause(2.0, lived=STARTED_AFTER - 1) == 2.0


@pytest.mark.parametrize(
    ("lives", "expected"),
    [(0.05, [0.05, 0.1, 0.2]), (0.4, [0.05, 0.05, 0.05])],
    ids=["crash loop", "killed after it started"],
)
async def test_the_pool_restarts_its_workers_with_these_pauses(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    lives: float,
    expected: list[float],
) -> None:
    """Real processes (a stand-in program that exits after ``lives`` seconds), with the
    pauses scaled down: the pauses logged are the policy's."""
    monkeypatch.setattr(worker_pool, "_PROGRAM", f"import time; time.sleep({lives})")
    monkeypatch.setattr(worker_pool, "FIRST_PAUSE", 0.05)
    monkeypatch.setattr(worker_pool, "STARTED_AFTER", 0.2)
    caplog.set_level(logging.WARNING, logger="converge.cli.workers")
    pool = worker_pool.WorkerPool(1, {"PATH": "/usr/bin:/bin"})
    await pool.start()
    try:
        for _ in range(600):
            pauses = [r.pause for r in caplog.records if hasattr(r, "pause")]
            if len(pauses) >= len(expected):
                break
            await asyncio.sleep(0.02)
    finally:
        await pool.stop()
    assert pauses[: len(expected)] == expected
