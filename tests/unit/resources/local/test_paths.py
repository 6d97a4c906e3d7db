"""Confinement: every path lands strictly inside an allowed root, or is refused by name."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converge.resources.local.paths import ConfinementError, confine, parse_mode, shown_mode


def test_relative_paths_start_at_the_first_root(root: Path) -> None:
    assert confine("a/b.txt", (root,)) == root / "a" / "b.txt"
    assert confine(str(root / "x"), (root,)) == root / "x"


def test_dot_dot_escaping_the_root_is_refused(root: Path) -> None:
    with pytest.raises(
        ConfinementError, match=r"'\.\./outside' resolves to .*outside the allowed roots"
    ):
        confine("../outside", (root,))
    assert confine("a/../b", (root,)) == root / "b"


def test_a_symlink_pointing_outside_is_refused(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", root / "link")
    with pytest.raises(ConfinementError, match="outside the allowed roots"):
        confine("link/file.txt", (root,))


def test_the_root_itself_and_no_roots_are_refused(root: Path) -> None:
    with pytest.raises(ConfinementError, match="is an allowed root itself"):
        confine(".", (root,))
    assert confine(".", (root,), allow_root=True) == root
    with pytest.raises(ConfinementError, match="no allowed roots are configured"):
        confine("a", ())
    with pytest.raises(ConfinementError, match="outside"):
        confine("/etc/passwd", (root,))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["..", ".", "a", "b", "link"]), min_size=1, max_size=6))
def test_whatever_the_parts_the_result_is_inside_or_refused(parts: list[str]) -> None:
    root = Path(os.path.realpath("/tmp"))
    try:
        resolved = confine("/".join(parts), (root,))
    except ConfinementError:
        return
    assert root in resolved.parents


def test_modes_are_quoted_octal_strings() -> None:
    assert parse_mode("0644") == 0o644
    assert parse_mode("755") == 0o755
    with pytest.raises(ValueError, match=r"quoted octal string such as '0644'.*420"):
        parse_mode(420)
    with pytest.raises(ValueError, match="expected an octal mode"):
        parse_mode("0999")
    assert shown_mode(0o644, "644") == "644"
    assert shown_mode(0o600, "644") == "0600"
