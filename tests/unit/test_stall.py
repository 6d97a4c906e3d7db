"""The sweeper's rule for lost work: a traversal's ready nodes are re-sent only once it has
made no progress for its patience, and less often each time that changes nothing."""

from __future__ import annotations

import pytest

from converge.core.stall import StallWatch
from converge.engine.settings import EngineSettings


def sweep(watch: StallWatch, reported: dict[str, int]) -> set[str]:
    """One sweep over the traversals (reported count each); the stalled ones."""
    for traversal, count in reported.items():
        watch.observe(traversal, count)
    watch.forget_others()
    return {t for t in reported if watch.stalled(t)}


def test_a_traversal_that_keeps_reporting_never_stalls() -> None:
    watch = StallWatch(patience=2)
    assert [sweep(watch, {"t": n}) for n in range(1, 50)] == [set()] * 49


def test_a_quiet_traversal_stalls_after_its_patience() -> None:
    watch = StallWatch(patience=2)
    assert sweep(watch, {"t": 5}) == set()  # first seen: nothing to compare with
    assert sweep(watch, {"t": 5}) == set()  # quiet once
    assert sweep(watch, {"t": 5}) == {"t"}  # quiet twice: stalled


def test_a_report_resets_the_wait() -> None:
    watch = StallWatch(patience=2)
    sweep(watch, {"t": 5})
    sweep(watch, {"t": 5})
    assert sweep(watch, {"t": 6}) == set()
    assert sweep(watch, {"t": 6}) == set()
    assert sweep(watch, {"t": 6}) == {"t"}


def test_after_a_resend_the_patience_doubles_up_to_the_longest() -> None:
    watch = StallWatch(patience=1, longest_patience=4)
    stalls = []
    sweep(watch, {"t": 0})
    for number in range(1, 20):
        if sweep(watch, {"t": 0}):
            stalls.append(number)
            watch.resent("t")
    # patience 1, 2, 4, then 4 again: the re-sends get sparse but never stop
    assert stalls == [1, 3, 7, 11, 15, 19]


def test_progress_after_a_resend_brings_the_patience_back() -> None:
    watch = StallWatch(patience=1, longest_patience=8)
    sweep(watch, {"t": 0})
    assert sweep(watch, {"t": 0}) == {"t"}
    watch.resent("t")
    assert sweep(watch, {"t": 0}) == set()  # patience now 2
    assert sweep(watch, {"t": 1}) == set()  # a report: patience 1 again
    assert sweep(watch, {"t": 1}) == {"t"}


def test_traversals_are_watched_apart() -> None:
    watch = StallWatch(patience=1)
    sweep(watch, {"moving": 0, "quiet": 0})
    assert sweep(watch, {"moving": 1, "quiet": 0}) == {"quiet"}


def test_a_traversal_not_looked_at_starts_afresh() -> None:
    watch = StallWatch(patience=1)
    sweep(watch, {"t": 3})
    sweep(watch, {})  # finished, or another sweeper's share for a while
    assert sweep(watch, {"t": 3}) == set()
    assert sweep(watch, {"t": 3}) == {"t"}


@pytest.mark.parametrize(("patience", "longest"), [(0, 4), (3, 2)])
def test_patience_must_make_sense(patience: int, longest: int) -> None:
    with pytest.raises(ValueError, match="patience"):
        StallWatch(patience=patience, longest_patience=longest)


def test_after_a_worker_died_every_traversal_is_stalled_for_one_sweep() -> None:
    """Checks a worker continued itself have no message to come back when it dies: the
    next sweep re-sends ready work even of a traversal that moves, then the rule is back."""
    watch = StallWatch(patience=2)
    watch.observe("moving", 5)
    watch.observe("quiet", 7)
    watch.forget_others()
    watch.suspect_all()
    # The next sweep (in the engine's order: observe, ask, then forget the others).
    watch.observe("moving", 6)
    watch.observe("quiet", 7)
    assert watch.stalled("moving") and watch.stalled("quiet")
    watch.resent("moving")
    watch.forget_others()
    # The sweep after: moving again, not stalled; the re-send did not double its patience.
    watch.observe("moving", 7)
    assert not watch.stalled("moving")
    watch.observe("moving", 7)
    watch.observe("moving", 7)
    assert watch.stalled("moving")  # two quiet sweeps: its patience is still 2


def test_the_longest_patience_is_no_longer_than_a_dead_process_holds_its_claims() -> None:
    """Doubling stops where lost work would wait longer than the claims of a process whose
    heartbeat went stale: 30 s of staleness at a sweep every 2 s is 15 sweeps."""
    assert EngineSettings(sweep_interval=2.0, engine_stale_after=30.0).longest_sweep_patience == 15
    short = EngineSettings(sweep_interval=2.0, engine_stale_after=1.0, sweep_patience=3)
    assert short.longest_sweep_patience == 3
    watch = StallWatch(patience=2, longest_patience=15)
    for _ in range(6):
        watch.resent("t")  # not watched yet: nothing to double
    watch.observe("t", 1)
    for _ in range(6):
        watch.resent("t")
    quiet = 0
    while not watch.stalled("t"):
        watch.observe("t", 1)
        quiet += 1
    assert quiet == 15


def test_a_traversal_quiet_while_other_work_moves_waits_for_the_longest_patience() -> None:
    """Queued behind another traversal's work (nested stacks published one after the
    other), a traversal is quiet but nothing is lost: it is re-sent only once quiet for the
    busy patience, or as soon as the work elsewhere stops too."""
    watch = StallWatch(patience=2, longest_patience=4, busy_patience=6)
    activity = 100
    quiet_sweeps = 0
    while True:
        activity += 50  # the first traversal's work goes on, events keep coming
        watch.observe_activity(activity)
        watch.observe("behind", 0)
        watch.forget_others()
        if watch.stalled("behind"):
            break
        quiet_sweeps += 1
    assert quiet_sweeps == 6  # first seen, then 6 quiet sweeps: the busy patience
    # The same traversal when nothing moves anywhere: the patience alone.
    idle = StallWatch(patience=2, longest_patience=6)
    stalled_at = []
    for sweep_number in range(4):
        idle.observe_activity(100)
        idle.observe("lost", 3)
        if idle.stalled("lost"):
            stalled_at.append(sweep_number)
        idle.forget_others()
    assert stalled_at[0] == 2


def test_a_worker_gone_stalls_even_while_other_work_moves() -> None:
    watch = StallWatch(patience=2, longest_patience=30)
    watch.observe_activity(1)
    watch.observe("t", 5)
    watch.forget_others()
    watch.suspect_all()
    watch.observe_activity(2)
    watch.observe("t", 5)
    assert watch.stalled("t") and watch.suspected("t")
