"""The descriptor walk: a symlink put in the way after the check stops the action.

The attacker's timing is made deterministic here by swapping the parent right after the
plugin's check (``locate``) returns; ``tests/integration/test_symlink_race.py`` races a
real thread instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext
from converge.resources.local import LocalDirectory, LocalFile, confined, directory
from converge.resources.local.confined import Location, locate_recorded, opened_parent
from converge.resources.local.paths import ConfinementError

LocalContext = Callable[..., ResourceContext]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    victim = tmp_path / "outside"
    (victim / "d").mkdir(parents=True)
    (victim / "f").write_text("outside")
    (victim / "d" / "keep").write_text("outside")
    return victim


def swap_for_symlink(directory_path: Path, target: Path) -> None:
    directory_path.rename(directory_path.with_name("moved-away"))
    directory_path.symlink_to(target)


def snapshot(tree: Path) -> dict[str, Any]:
    return {
        str(path.relative_to(tree)): (
            path.read_bytes() if path.is_file() else None,
            path.stat().st_mode,
            os.listxattr(path),
        )
        for path in sorted(tree.rglob("*"))
    }


@pytest.fixture
def swap_after_check(
    root: Path, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> Callable[[], None]:
    """Make ``root/shared`` a symlink to ``outside`` as soon as the path has been checked."""
    (root / "shared").mkdir()

    def arm() -> None:
        def checked_then_swapped(raw: str, roots: Any, **options: Any) -> Location:
            location = confined.locate(raw, roots, **options)
            swap_for_symlink(root / "shared", outside)
            return location

        monkeypatch.setattr(directory, "locate", checked_then_swapped)

    return arm


@pytest.mark.parametrize(
    ("plugin", "props"),
    [
        (LocalFile(), {"path": "shared/f", "content": "x", "mode": "0600"}),
        (LocalDirectory(), {"path": "shared/d", "mode": "0700", "adopt": True}),
    ],
)
async def test_a_parent_swapped_after_the_check_fails_the_create(
    plugin: LocalFile | LocalDirectory,
    props: dict[str, Any],
    root: Path,
    outside: Path,
    swap_after_check: Callable[[], None],
    local_context: LocalContext,
) -> None:
    before = snapshot(outside)
    swap_after_check()
    with pytest.raises(PermanentFailure, match=r"a symlink at .*/root/shared would lead outside"):
        await plugin.create(local_context(), props)
    assert snapshot(outside) == before


async def test_a_parent_swapped_before_an_update_or_delete_fails_them(
    root: Path, outside: Path, local_context: LocalContext
) -> None:
    plugin, ctx = LocalFile(), local_context()
    props = {"path": "shared/f", "content": "x", "mode": "0600"}
    made = await plugin.create(ctx, props)
    applied = AppliedState(made.physical_id, props, made.data)
    directories = LocalDirectory()
    dir_props = {"path": "shared/d", "mode": "0755", "purge_on_delete": True}
    made_dir = await directories.create(ctx, dir_props)
    before = snapshot(outside)
    swap_for_symlink(root / "shared", outside)
    # The recorded path is taken literally: the symlink is met, not resolved to elsewhere.
    with pytest.raises(PermanentFailure, match=r"cannot delete .*a symlink at .*/shared"):
        await plugin.delete(ctx, applied)
    with pytest.raises(PermanentFailure, match=r"cannot delete .*a symlink at .*/shared"):
        await directories.delete(ctx, AppliedState(made_dir.physical_id, dir_props, made_dir.data))
    assert await plugin.observe(ctx, applied) is None
    assert snapshot(outside) == before


async def test_purge_unlinks_symlinks_inside_and_leaves_what_they_point_to(
    root: Path, outside: Path, local_context: LocalContext
) -> None:
    plugin, ctx = LocalDirectory(), local_context()
    props = {"path": "data", "mode": "0755", "purge_on_delete": True}
    made = await plugin.create(ctx, props)
    (root / "data" / "sub" / "deeper").mkdir(parents=True)
    (root / "data" / "sub" / "deeper" / "file").write_text("inside")
    (root / "data" / "sub" / "to-outside").symlink_to(outside / "d")
    (root / "data" / "to-file").symlink_to(outside / "f")
    before = snapshot(outside)
    await plugin.delete(ctx, AppliedState(made.physical_id, props, made.data))
    assert not (root / "data").exists()
    assert snapshot(outside) == before


def test_recorded_paths_are_taken_literally_and_confined(root: Path) -> None:
    assert locate_recorded(str(root / "a" / "b"), (root,)) == Location(root, ("a", "b"))
    with pytest.raises(ConfinementError, match="not an absolute path"):
        locate_recorded(f"{root}/../x", (root,))
    with pytest.raises(ConfinementError, match="outside the allowed roots"):
        locate_recorded("/etc/passwd", (root,))


def test_the_walk_refuses_a_file_in_the_way_and_makes_missing_directories(root: Path) -> None:
    (root / "file").write_text("")
    with (
        pytest.raises(ConfinementError, match=r"file is in the way"),
        opened_parent(Location(root, ("file", "x"))),
    ):
        pass
    with opened_parent(Location(root, ("a", "b", "c")), create=True) as parent:
        assert os.path.samestat(os.fstat(parent), (root / "a" / "b").stat())
    with pytest.raises(FileNotFoundError), opened_parent(Location(root, ("none", "x"))):
        pass
