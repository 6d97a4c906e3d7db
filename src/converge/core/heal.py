"""When to heal a drifted resource: exponential backoff, then give up (pure).

Two controllers fighting over one resource would make a heal storm; each heal therefore
waits longer than the one before, and after ``max_attempts`` heals that did not hold the
resource is given up on (marked FAILED). A heal "held" when no drift came back for
``stable_after`` seconds: the count starts again then.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class HealPolicy:
    base_delay: float = 1.0  # wait before the second heal
    factor: float = 2.0
    max_delay: float = 300.0
    max_attempts: int = 5
    stable_after: float = 600.0


@dataclass(frozen=True)
class HealHistory:
    """What the store remembers about a resource's heals."""

    attempts: int = 0
    last_attempt_at: float | None = None
    next_allowed_at: float | None = None


class Verdict(StrEnum):
    HEAL_NOW = "HEAL_NOW"
    WAIT = "WAIT"
    GIVE_UP = "GIVE_UP"


@dataclass(frozen=True)
class HealDecision:
    verdict: Verdict
    reason: str
    history: HealHistory  # what to store (after a HEAL_NOW: the attempt counted)
    wait_until: float | None = None


def backoff(attempts: int, policy: HealPolicy) -> float:
    """Seconds to wait after the ``attempts``-th heal before the next one."""
    if attempts <= 0:
        return 0.0
    return min(policy.max_delay, policy.base_delay * policy.factor ** (attempts - 1))


def decide_heal(history: HealHistory, now: float, policy: HealPolicy) -> HealDecision:
    """Heal a drifted resource now, wait, or give up. Purely computational, no side-effects."""
    if history.last_attempt_at is not None and now - history.last_attempt_at >= policy.stable_after:
        history = HealHistory()  # the last heal held: this is new drift
    if history.attempts >= policy.max_attempts:
        return HealDecision(
            Verdict.GIVE_UP,
            f"drift came back after {history.attempts} heals: giving up on healing it "
            "(something else keeps changing it)",
            history,
        )
    if history.next_allowed_at is not None and now < history.next_allowed_at:
        return HealDecision(
            Verdict.WAIT,
            f"healed {history.attempts} times; next heal allowed in "
            f"{history.next_allowed_at - now:.1f}s",
            history,
            wait_until=history.next_allowed_at,
        )
    attempts = history.attempts + 1
    healed = HealHistory(
        attempts=attempts,
        last_attempt_at=now,
        next_allowed_at=now + backoff(attempts, policy),
    )
    return HealDecision(Verdict.HEAL_NOW, f"heal attempt {attempts}", healed)
