"""A check of a Local::* resource that reaches a worker of another host: that worker does
not act on it while the resource's own host serves; once none does, it takes it over."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path
from typing import Any

import pytest

from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.messages import CheckResource
from converge.resources.builtin import world
from support.engines import fast, two_engines
from support.world import FAST, eventually


def file_template(path: Path, content: str) -> str:
    return f"""
heat_template_version: 2021-04-16
resources:
  note:
    type: Local::File
    properties: {{path: '{path}', content: '{content}'}}
  after: {{type: OS::Heat::None, depends_on: note}}
"""


def on_host(tmp_path: Path, host: str) -> EngineSettings:
    return dataclasses.replace(
        FAST,
        host=host,
        allowed_roots=(tmp_path,),
        plugin_settings={world.SETTING: str(tmp_path / "world.db")},
    )


async def note_host(cv: Converge, stack: str) -> str | None:
    found = await cv.get_stack(stack)
    rows = await cv.engine.ctx.store.list_resources(found.id)
    (row,) = [row for row in rows if row.name == "note"]
    return row.host


async def test_a_renamed_machine_still_manages_its_resources(tmp_path: Path) -> None:
    """The embedded mode on a machine whose name changed since the state was written: no
    worker of the old name is alive, so this one acts, and the rows record the new name."""
    state, note = tmp_path / "s.db", tmp_path / "note.txt"
    async with Converge.embedded(state, settings=on_host(tmp_path, "old-name")) as cv:
        created = await cv.create_stack("notes", file_template(note, "one"))
        assert created.stack_status == "CREATE_COMPLETE", created.stack_status_reason
        assert await note_host(cv, "notes") == "old-name"
    async with Converge.embedded(state, settings=on_host(tmp_path, "new-name")) as cv:
        updated = await asyncio.wait_for(cv.update_stack("notes", file_template(note, "two")), 30)
        assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
        assert note.read_text() == "two"
        assert await note_host(cv, "notes") == "new-name"
        deleted = await asyncio.wait_for(cv.delete_stack("notes"), 30)
        assert deleted.stack_status == "DELETE_COMPLETE", deleted.stack_status_reason
        assert not note.exists()


async def test_work_of_a_host_with_a_live_worker_is_left_to_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two processes over one state file, on hosts alpha and beta, each with its in-process
    bus: an update started on beta delivers the check of alpha's file to beta, which must
    not touch it while alpha's worker is alive (it cannot reach alpha: it leaves the work
    and says why). When alpha stops serving, beta takes the file over."""
    caplog.set_level(logging.WARNING, logger="converge.engine.host_binding")
    state, note = tmp_path / "s.db", tmp_path / "note.txt"
    alpha_settings, beta_settings = on_host(tmp_path, "alpha"), on_host(tmp_path, "beta")
    async with Converge.embedded(state, settings=beta_settings) as beta:
        # alpha has the worker role only: no sweeper of its own to re-send the work there.
        async with Converge.embedded(state, settings=alpha_settings, roles=("worker",)) as alpha:
            created = await alpha.create_stack("notes", file_template(note, "one"))
            assert created.stack_status == "CREATE_COMPLETE", created.stack_status_reason
            assert await note_host(beta, "notes") == "alpha"
            await beta.update_stack("notes", file_template(note, "two"), wait=False)

            def left_for_alpha() -> int:
                return sum("left for that host" in r.getMessage() for r in caplog.records)

            async def refused_twice() -> bool:  # the first delivery and a sweeper's re-send
                return left_for_alpha() >= 2

            await eventually(refused_twice)
            assert note.read_text() == "one"
            assert (await beta.get_stack("notes")).stack_status == "UPDATE_IN_PROGRESS"
            assert await note_host(beta, "notes") == "alpha"
        # alpha stopped (its service row is gone): beta's sweeper re-sends, beta takes over.
        updated = await asyncio.wait_for(beta.wait("notes"), 30)
        assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
        assert note.read_text() == "two"
        assert await note_host(beta, "notes") == "beta"
        assert any("taking the resource over" in r.getMessage() for r in caplog.records)


@pytest.mark.postgres
@pytest.mark.rabbitmq
async def test_a_check_for_another_host_is_sent_to_that_host(
    postgres_url: str, rabbitmq_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the broker: a check of beta's file delivered to alpha (misrouted) is sent on to
    beta's queue, not acted on; beta does the work."""
    base = fast(tmp_path, allowed_roots=(tmp_path,))
    alpha_settings, beta_settings = (dataclasses.replace(base, host=h) for h in ("alpha", "beta"))
    note = tmp_path / "note.txt"
    async with two_engines(postgres_url, rabbitmq_url, alpha_settings, beta_settings) as (
        alpha,
        beta,
        _,
    ):
        created = await asyncio.wait_for(beta.create_stack("notes", file_template(note, "one")), 60)
        assert created.stack_status == "CREATE_COMPLETE", created.stack_status_reason
        # The update pauses before it changes the file: its traversal stays open.
        environment = {"resource_registry": {"resources": {"note": {"hooks": "pre-update"}}}}
        await beta.update_stack(
            "notes", file_template(note, "two"), environments=[environment], wait=False
        )

        async def paused() -> bool:
            events = await beta.list_events("notes", resource_name="note")
            return any("paused until Hook pre-update" in e.resource_status_reason for e in events)

        await eventually(paused, timeout=30)
        stack = await beta.engine.ctx.store.find_stack("notes", beta.project_id)
        rows = await beta.engine.ctx.store.list_resources(stack.id)
        (row,) = [r for r in rows if r.name == "note"]
        sent: list[tuple[dict[str, Any], str | None]] = []
        real_send = alpha.engine.ctx.bus.send_work

        async def recording(message: dict[str, Any], *, host: str | None = None) -> None:
            sent.append((message, host))
            await real_send(message, host=host)

        monkeypatch.setattr(alpha.engine.ctx.bus, "send_work", recording)
        message = CheckResource(stack.id, stack.current_traversal, row.id, True)
        await alpha.engine.worker.check(message)
        assert sent == [(message.to_dict(), "beta")]
        after = await beta.engine.ctx.store.get_resource(row.id)
        assert after is not None and after.atomic_key == row.atomic_key  # untouched
        await beta.clear_hook("notes", "note", "pre-update")
        updated = await asyncio.wait_for(beta.wait("notes"), 60)
        assert updated.stack_status == "UPDATE_COMPLETE", updated.stack_status_reason
        assert note.read_text() == "two"
        assert await note_host(beta, "notes") == "beta"
