"""allowed_pattern: Heat's whole-match rule, in linear time, and what RE2 refuses."""

from __future__ import annotations

import time

import pytest

from converge.core.patterns import PatternError, compile_pattern, matches_whole
from converge.core.schema import Constraint, check_constraints, constraint_shape_problem


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("[a-z]+", "abc", True),
        ("[a-z]+", "abc1", False),  # matches a prefix only: Heat wants all of it
        ("[0-9]+", "a1", False),  # matched from the start, not searched
        ("a|ab", "ab", False),  # the first alternative that matches wins, as in Python re
        ("^[A-Z][a-z]*$", "Name", True),
        ("(?i)name", "NAME", True),
        ("", "", True),
    ],
)
def test_whole_match_as_heat(pattern: str, text: str, expected: bool) -> None:
    assert matches_whole(pattern, text) is expected


def test_catastrophic_pattern_runs_in_linear_time() -> None:
    # Python's re takes seconds at 26 characters and doubles every two more.
    constraint = Constraint("allowed_pattern", "(a+)+$")
    started = time.perf_counter()
    problem = check_constraints("a" * 10_000 + "!", (constraint,))
    assert time.perf_counter() - started < 0.5
    assert problem is not None and "does not match pattern" in problem


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [(r"(a)\1", "invalid escape sequence"), ("(?=a)a", "invalid perl operator")],
)
def test_patterns_that_need_backtracking_are_refused_with_the_reason(
    pattern: str, reason: str
) -> None:
    with pytest.raises(PatternError, match=reason):
        compile_pattern(pattern)
    message = constraint_shape_problem(Constraint("allowed_pattern", pattern))
    assert message is not None
    assert message.startswith("allowed_pattern is not a valid regular expression: " + reason)
    assert "no backreferences or look-around" in message
