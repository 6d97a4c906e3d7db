"""The heal decision: backoff between heals, giving up, starting over after a stable spell."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from converge.core.drift import MASK, Drift, DriftStatus, compare, short_digest
from converge.core.heal import HealHistory, HealPolicy, Verdict, backoff, decide_heal

POLICY = HealPolicy(base_delay=1.0, factor=2.0, max_delay=10.0, max_attempts=4, stable_after=100)


def test_first_drift_heals_at_once() -> None:
    decision = decide_heal(HealHistory(), 50.0, POLICY)
    assert decision.verdict == Verdict.HEAL_NOW
    assert decision.history == HealHistory(1, 50.0, 51.0)


def test_drift_back_before_the_backoff_waits() -> None:
    decision = decide_heal(HealHistory(1, 50.0, 51.0), 50.5, POLICY)
    assert decision.verdict == Verdict.WAIT
    assert decision.wait_until == 51.0
    assert decision.history == HealHistory(1, 50.0, 51.0)


def test_backoff_doubles_up_to_the_limit() -> None:
    assert [backoff(n, POLICY) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_repeated_heals_end_in_giving_up() -> None:
    history, now, verdicts = HealHistory(), 0.0, []
    for _ in range(6):
        decision = decide_heal(history, now, POLICY)
        verdicts.append(decision.verdict)
        history = decision.history
        now = (history.next_allowed_at or now) + 0.1
    assert verdicts == [Verdict.HEAL_NOW] * 4 + [Verdict.GIVE_UP] * 2
    assert "after 4 heals" in decide_heal(history, now, POLICY).reason


def test_a_heal_that_held_starts_the_count_again() -> None:
    decision = decide_heal(HealHistory(4, 10.0, 18.0), 10.0 + 100, POLICY)
    assert decision.verdict == Verdict.HEAL_NOW
    assert decision.history.attempts == 1


@given(
    attempts=st.integers(0, 10),
    last=st.floats(0, 1000),
    gap=st.floats(0, 1000),
)
def test_heals_never_come_faster_than_the_backoff(attempts: int, last: float, gap: float) -> None:
    history = HealHistory(attempts, last if attempts else None, last + backoff(attempts, POLICY))
    now = last + gap
    decision = decide_heal(history, now, POLICY)
    if decision.verdict == Verdict.HEAL_NOW:
        assert attempts == 0 or gap >= backoff(attempts, POLICY) or gap >= POLICY.stable_after
        assert decision.history.attempts <= POLICY.max_attempts
    if decision.verdict == Verdict.GIVE_UP:
        assert attempts >= POLICY.max_attempts and gap < POLICY.stable_after


def test_compare_statuses_and_unobservable_properties() -> None:
    assert compare({"a": 1}, None).status == DriftStatus.DELETED
    assert compare({"a": 1, "b": 2}, {"a": 1}).status == DriftStatus.IN_SYNC
    drift = compare({"a": 1, "pw": "x"}, {"a": 2, "pw": "y"}, hidden={"pw"})
    assert drift.status == DriftStatus.MODIFIED
    assert drift.detail["pw"] == {"wanted": MASK, "found": MASK}
    assert drift.describe() == "MODIFIED: a wanted 1, found 2; pw wanted '******', found '******'"


def test_content_digests_are_shown_short() -> None:
    wanted, found = "9efc4ba5997b" + "a" * 52, "92e78d0b0329" + "b" * 52
    drift = Drift(DriftStatus.MODIFIED, {"content_sha256": {"wanted": wanted, "found": found}})
    assert drift.describe() == (
        "MODIFIED: content_sha256 wanted '9efc4ba5997b', found '92e78d0b0329'"
    )
    assert short_digest("not a digest") == "not a digest" and short_digest(3) == 3
