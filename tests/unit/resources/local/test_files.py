"""Local::Directory and Local::File on a real temporary filesystem."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from converge.errors import PermanentFailure
from converge.resources.base import AppliedState, ResourceContext, ValidationContext
from converge.resources.local import LocalDirectory, LocalFile
from converge.resources.local.paths import ADOPTED_ATTR, ROW_ATTR

LocalContext = Callable[..., ResourceContext]


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_file_create_observe_update_delete(root: Path, local_context: LocalContext) -> None:
    plugin, ctx = LocalFile(), local_context()
    props = {"path": "conf/app.conf", "content": "a = 1\n", "mode": "0600"}
    outcome = await plugin.create(ctx, props)
    target = root / "conf" / "app.conf"
    assert outcome.physical_id == str(target)
    assert target.read_text() == "a = 1\n" and mode_of(target) == 0o600
    assert outcome.data["size"] == 6
    applied = AppliedState(outcome.physical_id, props, outcome.data)
    assert await plugin.observe(ctx, applied) == props
    assert plugin.essence(props) == plugin.essence(await plugin.observe(ctx, applied) or {})

    target.write_text("a = 2\n")
    os.chmod(target, 0o644)
    live = await plugin.observe(ctx, applied)
    assert live is not None and live["content"] == "a = 2\n" and live["mode"] == "0644"
    assert plugin.essence(live) != plugin.essence(props)

    new = {**props, "content": "a = 3\n"}
    updated = await plugin.update(ctx, applied, new)
    assert updated.physical_id == outcome.physical_id and target.read_text() == "a = 3\n"
    assert not [p for p in target.parent.iterdir() if p.name.endswith(".tmp")]

    await plugin.delete(ctx, AppliedState(updated.physical_id, new, updated.data))
    assert not target.exists()
    await plugin.delete(ctx, AppliedState(updated.physical_id, new, updated.data))  # gone: fine
    assert await plugin.observe(ctx, applied) is None


async def test_file_create_takes_up_its_own_work_and_refuses_a_strangers_file(
    root: Path, local_context: LocalContext
) -> None:
    plugin, ctx = LocalFile(), local_context()
    props = {"path": "x.txt", "content": "mine", "mode": "0644"}
    await plugin.create(ctx, props)
    # An interrupted create runs again: the same file is taken up, not duplicated.
    again = await plugin.create(ctx, {**props, "content": "mine, edited template"})
    assert (root / "x.txt").read_text() == "mine, edited template"
    assert again.data["adopted"] is False

    (root / "theirs.txt").write_text("not converge's")
    with pytest.raises(PermanentFailure, match=r"theirs.txt already exists and was not made by"):
        await plugin.create(ctx, {**props, "path": "theirs.txt"})
    assert (root / "theirs.txt").read_text() == "not converge's"
    # Matching content is no licence either: taking over is the author's explicit choice.
    (root / "same.txt").write_text("mine")
    with pytest.raises(PermanentFailure, match=r"set 'adopt: true' to manage it"):
        await plugin.create(ctx, {**props, "path": "same.txt"})
    assert os.listxattr(root / "same.txt") == []
    # Another stack's resource of the same name made this one: not ours either.
    other = local_context(stack_id="stack-2")
    await plugin.create(other, {**props, "path": "other.txt"})
    with pytest.raises(PermanentFailure, match=r"stack stack-1, resource res"):
        await plugin.create(ctx, {**props, "path": "other.txt"})


async def test_delete_removes_what_a_killed_write_left_behind(
    root: Path, local_context: LocalContext
) -> None:
    """A worker killed between writing the temporary file and renaming it: the row's
    delete (a rollback dropping the replacement it was making) leaves nothing behind."""
    plugin, ctx = LocalFile(), local_context()
    props = {"path": "half.txt", "content": "never renamed"}
    leftover = root / f".half.txt.{ctx.physical_name}.tmp"
    leftover.write_text("never renamed")
    await plugin.delete(ctx, AppliedState(None, props))  # the create never recorded an id
    assert list(root.iterdir()) == []


async def test_an_adopted_file_is_managed_and_left_in_place_on_delete(
    root: Path, local_context: LocalContext
) -> None:
    plugin, ctx = LocalFile(), local_context()
    (root / "existing.conf").write_text("the user's\n")
    props = {"path": "existing.conf", "content": "managed\n", "mode": "0600", "adopt": True}
    outcome = await plugin.create(ctx, props)
    assert outcome.data["adopted"] is True
    assert (root / "existing.conf").read_text() == "managed\n"
    assert os.getxattr(root / "existing.conf", ADOPTED_ATTR) == b"stack-1/res"
    again = await plugin.create(ctx, props)  # an interrupted create keeps it adopted
    assert again.data["adopted"] is True
    applied = AppliedState(outcome.physical_id, props, outcome.data)
    updated = await plugin.update(ctx, applied, {**props, "content": "v2\n"})
    assert updated.data["adopted"] is True
    await plugin.delete(ctx, AppliedState(updated.physical_id, props, updated.data))
    assert (root / "existing.conf").read_text() == "v2\n"  # handed back, not deleted
    assert os.listxattr(root / "existing.conf") == []

    # adopt: true where nothing exists makes the file, owns it, and deletes it.
    fresh = await plugin.create(ctx, {**props, "path": "fresh.conf"})
    assert fresh.data["adopted"] is False
    await plugin.delete(ctx, AppliedState(fresh.physical_id, props, fresh.data))
    assert not (root / "fresh.conf").exists()


async def test_cleanup_of_a_replaced_row_leaves_what_the_replacement_adopted(
    root: Path, local_context: LocalContext
) -> None:
    plugin = LocalFile()
    old, new = local_context(row="oldrow00"), local_context(row="newrow00")
    props = {"path": "f.txt", "content": "v", "mode": "0644"}
    first = await plugin.create(old, props)
    await plugin.create(new, props)
    assert os.getxattr(root / "f.txt", ROW_ATTR) == b"st-res-newrow00"
    await plugin.delete(old, AppliedState(first.physical_id, props, first.data))
    assert (root / "f.txt").exists()


async def test_action_time_checks_refuse_late_paths(local_context: LocalContext) -> None:
    with pytest.raises(PermanentFailure, match=r"res: '\.\./x' resolves to .* outside the allowed"):
        await LocalFile().create(local_context(), {"path": "../x", "content": "", "mode": "0644"})


async def test_directory_create_mode_and_delete(root: Path, local_context: LocalContext) -> None:
    plugin, ctx = LocalDirectory(), local_context()
    props = {"path": "a/b", "mode": "0750", "purge_on_delete": False}
    outcome = await plugin.create(ctx, props)
    assert mode_of(root / "a" / "b") == 0o750
    again = await plugin.create(ctx, props)
    assert again.physical_id == outcome.physical_id
    applied = AppliedState(outcome.physical_id, props, outcome.data)
    assert await plugin.observe(ctx, applied) == props
    os.chmod(root / "a" / "b", 0o700)
    assert (await plugin.observe(ctx, applied) or {})["mode"] == "0700"

    (root / "a" / "b" / "stray").write_text("x")
    with pytest.raises(PermanentFailure, match=r"is not empty \(stray\).*purge_on_delete"):
        await plugin.delete(ctx, applied)
    purge = AppliedState(outcome.physical_id, {**props, "purge_on_delete": True}, outcome.data)
    await plugin.delete(ctx, purge)
    assert not (root / "a" / "b").exists()
    await plugin.delete(ctx, purge)
    assert await plugin.observe(ctx, applied) is None


async def test_an_existing_directory_is_refused_unless_adopted_and_never_purged(
    root: Path, local_context: LocalContext
) -> None:
    plugin, ctx = LocalDirectory(), local_context()
    (root / "home" / "data").mkdir(parents=True)
    (root / "home" / "data" / "precious").write_text("the user's")
    props = {"path": "home/data", "mode": "0755", "purge_on_delete": True}
    with pytest.raises(PermanentFailure, match=r"home/data already exists and was not made by"):
        await plugin.create(ctx, props)
    assert os.listxattr(root / "home" / "data") == []

    adopted = await plugin.create(ctx, {**props, "adopt": True})
    assert adopted.data["adopted"] is True
    applied = AppliedState(adopted.physical_id, {**props, "adopt": True}, adopted.data)
    await plugin.delete(ctx, applied)
    assert (root / "home" / "data" / "precious").read_text() == "the user's"
    assert os.listxattr(root / "home" / "data") == []


async def test_a_file_where_a_directory_should_be_fails(
    root: Path, local_context: LocalContext
) -> None:
    (root / "taken").write_text("")
    with pytest.raises(PermanentFailure, match="exists and is not a directory"):
        await LocalDirectory().create(local_context(), {"path": "taken", "mode": "0755"})


def test_validation_names_each_bad_property(validation: ValidationContext) -> None:
    problems = dict(LocalFile().validate({"path": "../../etc/x", "mode": 644}, validation))
    assert "outside the allowed roots" in problems["path"]
    assert "quoted octal string" in problems["mode"]
    assert list(LocalDirectory().validate({"path": "ok/dir", "mode": "0755"}, validation)) == []
    nowhere = ValidationContext(allowed_roots=())
    assert "no allowed roots" in dict(LocalDirectory().validate({"path": "d"}, nowhere))["path"]
