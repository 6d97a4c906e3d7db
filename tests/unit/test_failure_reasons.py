"""Failure reasons in Heat's form (heat.common.exception.ResourceFailure)."""

from __future__ import annotations

from converge.errors import PermanentFailure


def test_a_failure_names_its_kind_and_path() -> None:
    assert PermanentFailure("boom").reason("db") == "Error: resources.db: boom"
    failure = PermanentFailure("bad", kind="ValueError", path=["resources", "inner"])
    assert failure.reason("box") == "ValueError: resources.box.resources.inner: bad"


def test_a_nested_stacks_reason_keeps_kind_path_and_message() -> None:
    nested = "Resource CREATE failed: ValueError: resources.oops: Test: it failed"
    failure = PermanentFailure.from_reason(nested, "fallback")
    assert failure.kind == "ValueError"
    assert failure.path == ("resources", "oops")
    assert str(failure) == "Test: it failed"
    assert failure.reason("victim") == (
        "ValueError: resources.victim.resources.oops: Test: it failed"
    )


def test_any_other_reason_falls_back() -> None:
    for reason in ("Timed out", "Stack CREATE cancelled", "Resource CREATE failed: odd"):
        failure = PermanentFailure.from_reason(reason, "nested stack x is CREATE_FAILED")
        assert str(failure) == "nested stack x is CREATE_FAILED"
        assert failure.kind == "Error" and failure.path == ()
