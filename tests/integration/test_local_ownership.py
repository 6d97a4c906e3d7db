"""Through the engine: converge never takes over, nor destroys, a user's directory or file.

A create over an existing directory fails naming the path and ``adopt``, and its rollback
leaves the directory and its content alone; with ``adopt: true`` the stack manages it and
deleting the stack hands it back, content and all, even with ``purge_on_delete``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from converge.api import Converge
from converge.engine.settings import EngineSettings


@pytest.fixture
async def cv(root: Path) -> AsyncIterator[Converge]:
    settings = EngineSettings(allowed_roots=(root,), sweep_interval=0.1)
    async with Converge.embedded(root / "state.db", settings=settings) as handle:
        yield handle


def template(adopt: bool) -> dict[str, Any]:
    return {
        "heat_template_version": "2021-04-16",
        "resources": {
            "data": {
                "type": "Local::Directory",
                "properties": {"path": "data", "purge_on_delete": True, "adopt": adopt},
            },
            "conf": {
                "type": "Local::File",
                "properties": {
                    "path": {"list_join": ["/", [{"get_attr": ["data", "path"]}, "app.conf"]]},
                    "content": "managed\n",
                    "adopt": adopt,
                },
            },
        },
    }


async def test_a_users_directory_is_refused_then_adopted_and_handed_back(
    cv: Converge, root: Path
) -> None:
    (root / "data").mkdir()
    (root / "data" / "precious").write_text("the user's\n")
    (root / "data" / "app.conf").write_text("the user's config\n")

    stack = await cv.create_stack("refused", template(adopt=False))
    assert stack.stack_status == "ROLLBACK_COMPLETE", stack.stack_status_reason
    events = [event.resource_status_reason or "" for event in await cv.list_events("refused")]
    assert any(
        "data already exists and was not made by converge" in reason
        and "set 'adopt: true'" in reason
        for reason in events
    ), events
    assert (root / "data" / "precious").read_text() == "the user's\n"
    assert (root / "data" / "app.conf").read_text() == "the user's config\n"
    assert os.listxattr(root / "data") == []

    stack = await cv.create_stack("adopted", template(adopt=True))
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    assert (root / "data" / "app.conf").read_text() == "managed\n"
    stack = await cv.delete_stack("adopted")
    assert stack.stack_status == "DELETE_COMPLETE", stack.stack_status_reason
    assert (root / "data" / "precious").read_text() == "the user's\n"
    assert (root / "data" / "app.conf").read_text() == "managed\n"  # left, as last managed
    assert os.listxattr(root / "data") == [] and os.listxattr(root / "data" / "app.conf") == []


async def test_what_converge_made_with_adopt_true_is_still_deleted(
    cv: Converge, root: Path
) -> None:
    stack = await cv.create_stack("fresh", template(adopt=True))
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    (root / "data" / "scratch").write_text("made inside the managed directory\n")
    stack = await cv.delete_stack("fresh")
    assert stack.stack_status == "DELETE_COMPLETE", stack.stack_status_reason
    assert not (root / "data").exists()


async def test_an_adopted_directory_is_deleted_only_when_the_template_says_delete(
    cv: Converge, root: Path
) -> None:
    # The default deletion_policy hands an adopted thing back; a written-out Delete is the
    # template's explicit word that it may go (as for PostgreSQL roles and databases).
    (root / "data").mkdir()
    (root / "data" / "old").write_text("before converge\n")
    explicit = template(adopt=True)
    for resource in explicit["resources"].values():
        resource["deletion_policy"] = "Delete"
    stack = await cv.create_stack("explicit", explicit)
    assert stack.stack_status == "CREATE_COMPLETE", stack.stack_status_reason
    stack = await cv.delete_stack("explicit")
    assert stack.stack_status == "DELETE_COMPLETE", stack.stack_status_reason
    assert not (root / "data").exists()
