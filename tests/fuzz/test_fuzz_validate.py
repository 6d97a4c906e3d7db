"""Property: whatever a template, environment or file says, ``validate`` ends with a
clear answer — success or a ``TemplateError`` — never another exception, and quickly.

Cases are seeds from ``examples/``, ``tests/corpus/`` and ``tests/fuzz/seeds/`` mutated
by ``support.fuzz`` (structure and text). Under CI the examples are a fixed sample, so a
red build means a change broke something, not that the dice found something old;
``bench/bench_fuzz.py`` runs thousands more and records the figures.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.fuzz import Seed, describe, load_seeds, make_case, run_case

SEEDS = load_seeds()
SECONDS_PER_CASE = 5.0  # "a few seconds", generous for a loaded two-core machine


@settings(
    max_examples=100,
    deadline=None,  # timed below, with a message that says how to reproduce the case
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)
@given(
    seed=st.sampled_from(SEEDS),
    random_seed=st.integers(min_value=0, max_value=2**32 - 1),
    count=st.integers(min_value=1, max_value=6),
)
def test_validate_never_crashes_or_hangs(seed: Seed, random_seed: int, count: int) -> None:
    case = make_case(seed, random_seed, count)
    outcome = run_case(case)
    assert outcome.kind != "crash", f"{describe(case)}\n{outcome.detail}"
    assert outcome.seconds < SECONDS_PER_CASE, f"took {outcome.seconds:.1f} s: {describe(case)}"


def test_seeds_cover_the_examples_and_corpora() -> None:
    names = {seed.name for seed in SEEDS}
    assert "examples/provider/stack.yaml" in names
    assert "tests/corpus/bad_json.json" in names
    assert "tests/fuzz/seeds/functions.yaml" in names
    provider = next(seed for seed in SEEDS if seed.name == "examples/provider/stack.yaml")
    assert [name for name, _ in provider.environments] == ["env.yaml"]
    assert "server.yaml" in provider.files


def test_unmutated_rich_seeds_are_valid() -> None:
    # A seed that is already wrong would only exercise the first error path.
    for name in ("tests/fuzz/seeds/functions.yaml", "tests/fuzz/seeds/legacy.yaml"):
        seed = next(seed for seed in SEEDS if seed.name == name)
        outcome = run_case(make_case(seed, 0, 0))
        assert outcome.kind == "valid", (name, outcome.detail)


def test_cases_are_reproducible_from_their_seeds() -> None:
    seed = SEEDS[0]
    assert make_case(seed, 1234, 3) == make_case(seed, 1234, 3)
    assert make_case(seed, 1234, 3) != make_case(seed, 1235, 3)
