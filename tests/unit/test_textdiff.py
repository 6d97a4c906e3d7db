"""Short unified diffs of drifted content."""

from __future__ import annotations

from converge.core.textdiff import short_unified_diff


def test_a_long_content_diff_is_cut() -> None:
    wanted = "\n".join(f"line {i}" for i in range(200))
    found = "\n".join(f"LINE {i}" for i in range(200))
    text = short_unified_diff(wanted, found, max_lines=10)
    lines = text.splitlines()
    assert len(lines) == 11 and lines[-1] == "… (393 more diff lines not shown)"
    assert len(short_unified_diff(wanted, found, max_chars=300)) < 400
    assert short_unified_diff("same", "same") == ""
