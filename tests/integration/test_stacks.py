"""Stacks of real resources through the engine: updates, drift, heal, and a crashed engine."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from converge.api import Converge
from converge.core.heal import HealPolicy
from converge.engine.settings import EngineSettings
from converge.resources.local import procfs

PY = sys.executable
# Writes started-<tag> when it runs; on SIGTERM records which services had started by then.
SERVICE = (
    "import os, signal, sys, time\n"
    "tag = sys.argv[1]\n"
    "open(f'started-{tag}', 'w').close()\n"
    "def bye(*_):\n"
    "    open(f'stopped-{tag}', 'w').write(' '.join(sorted(os.listdir('.'))))\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "while True: time.sleep(1)\n"
)


def template(tag: str, content: str) -> dict[str, Any]:
    return {
        "heat_template_version": "2021-04-16",
        "resources": {
            "work": {"type": "Local::Directory", "properties": {"path": "work"}},
            "conf": {
                "type": "Local::File",
                "depends_on": "work",
                "properties": {"path": "work/app.conf", "content": content},
            },
            "svc": {
                "type": "Local::Process",
                "depends_on": "conf",
                "properties": {
                    "command": [PY, "-c", SERVICE, tag],
                    "working_directory": "work",
                    "log_file": "svc.log",
                    "stop_grace_secs": 3,
                    "startup_check_secs": 0.05,
                },
            },
        },
    }


def settings(root: Path, **extra: Any) -> EngineSettings:
    values: dict[str, Any] = {
        "allowed_roots": (root,),
        "sweep_interval": 0.1,
        "heartbeat_interval": 0.5,
        "drift_recheck_interval": 0.05,
        "observe_interval": 0.05,
        "heal_policy": HealPolicy(base_delay=0.05, factor=2.0, max_attempts=5, stable_after=600),
    }
    return EngineSettings(**{**values, **extra})


@pytest.fixture
async def cv(root: Path) -> AsyncIterator[Converge]:
    async with Converge.embedded(root / "state.db", settings=settings(root)) as handle:
        yield handle
        for stack in await handle.list_stacks():
            await handle.delete_stack(stack.id)


async def ids(cv: Converge, stack: str) -> dict[str, str]:
    return {r.resource_name: r.physical_resource_id for r in await cv.list_resources(stack)}


async def eventually(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s")
        await asyncio.sleep(0.05)


def marked(root: Path) -> list[procfs.ProcessIdentity]:
    """Every live process this test's stacks started (their cwd lies under the root)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environment = (entry / "environ").read_bytes()
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            identity = procfs.read(int(entry.name))
            if b"CONVERGE_RESOURCE=" in environment and cwd.startswith(str(root)) and identity:
                found.append(identity)
    return found


async def test_content_updates_in_place_and_a_new_command_starts_before_the_old_stops(
    cv: Converge, root: Path
) -> None:
    await cv.create_stack("app", template("one", "v = 1\n"))
    before = await ids(cv, "app")
    stack = await cv.update_stack("app", template("one", "v = 2\n"))
    assert stack.stack_status == "UPDATE_COMPLETE"
    assert await ids(cv, "app") == before  # in place: same file, same process
    assert (root / "work" / "app.conf").read_text() == "v = 2\n"

    stack = await cv.update_stack("app", template("two", "v = 2\n"))
    assert stack.stack_status == "UPDATE_COMPLETE", stack.stack_status_reason
    after = await ids(cv, "app")
    assert after["svc"] != before["svc"] and after["conf"] == before["conf"]
    old_pid = int(before["svc"].split(":")[0])
    assert procfs.read(old_pid) is None
    # The old service saw the new one already running when it was asked to stop.
    assert "started-two" in (root / "work" / "stopped-one").read_text().split()
    assert [p.pid for p in marked(root)] == [int(after["svc"].split(":")[0])]


async def test_check_reports_local_drift_and_converge_fixes_it(cv: Converge, root: Path) -> None:
    await cv.create_stack("app", template("one", "v = 1\n"))
    before = await ids(cv, "app")
    (root / "work" / "app.conf").write_text("tampered\n")
    os.kill(int(before["svc"].split(":")[0]), signal.SIGKILL)
    await eventually(lambda: procfs.read(int(before["svc"].split(":")[0])) is None)

    checked = await cv.check_stack("app")
    assert checked.stack_status == "CHECK_FAILED" or checked.stack_status == "CHECK_COMPLETE"
    drift = {view.resource_name: view for view in await cv.drift("app")}
    assert drift["svc"].drift_status == "DELETED"
    assert (
        drift["conf"].drift_status == "MODIFIED" and "content_sha256" in drift["conf"].drift_detail
    )
    assert drift["work"].drift_status == "IN_SYNC"

    fixed = await cv.update_stack("app", existing=True, converge=True)
    assert fixed.stack_status == "UPDATE_COMPLETE", fixed.stack_status_reason
    assert (root / "work" / "app.conf").read_text() == "v = 1\n"
    assert len(marked(root)) == 1
    assert {v.drift_status for v in await cv.drift("app")} <= {"IN_SYNC", "NOT_CHECKED"}

    # A directory removed behind converge's back is drift too; converge makes it again.
    stack_two = template("dir", "x")
    stack_two["resources"] = {"lone": {"type": "Local::Directory", "properties": {"path": "lone"}}}
    await cv.create_stack("lonely", stack_two)
    (root / "lone").rmdir()
    await cv.check_stack("lonely")
    assert [v.drift_status for v in await cv.drift("lonely")] == ["DELETED"]
    await cv.update_stack("lonely", existing=True, converge=True)
    assert (root / "lone").is_dir()


async def test_heal_restarts_a_killed_process_and_repairs_an_edited_file(root: Path) -> None:
    # A long poll interval: only pushed changes (pidfd, inotify) can make this fast, and the
    # process a heal starts is watched from when the heal settles, not from the next poll.
    slow_polls = settings(root, observe_interval=3600.0)
    async with (
        Converge.embedded(root / "state.db", settings=slow_polls) as cv,
        cv.serving() as sync,
    ):
        await cv.create_stack("app", template("one", "v = 1\n"), drift_policy="heal")
        for _round in range(2):
            before = await ids(cv, "app")
            await eventually(lambda before=before: _watched(sync, before["svc"]))
            os.kill(int(before["svc"].split(":")[0]), signal.SIGKILL)

            async def restarted(before: dict[str, str] = before) -> bool:
                now = await ids(cv, "app")
                pid = int(now["svc"].split(":")[0]) if now.get("svc") else 0
                return now.get("svc") != before["svc"] and procfs.read(pid) is not None

            await eventually(restarted)
            assert (await cv.wait("app")).stack_status == "UPDATE_COMPLETE"
        conf = root / "work" / "app.conf"
        conf_id = (await ids(cv, "app"))["conf"]
        conf.write_text("edited\n")
        await eventually(lambda: conf.read_text() == "v = 1\n")
        # an edited file is repaired in place, not replaced
        assert (await ids(cv, "app"))["conf"] == conf_id
        statuses = [e.resource_status for e in await cv.list_events("app", resource_name="conf")]
        assert "UPDATE_COMPLETE" in statuses and statuses.count("CREATE_COMPLETE") == 1
        assert len(marked(root)) == 1
        await cv.delete_stack("app")
    assert marked(root) == []


def _watched(sync: Any, physical_id: str) -> bool:
    """The process is among those the synchronizer's watch covers (pidfd armed)."""
    return physical_id in sync.sampler("Local::Process").watched


CRASHING = """
import asyncio, sys
from pathlib import Path
from converge.api import Converge
from converge.engine.settings import EngineSettings
from converge.resources.registry import PluginRegistry, default_registry

root = Path(sys.argv[1])
crash = sys.argv[2] == "crash"
registry = default_registry()
if crash:
    normal, registry = registry, PluginRegistry()
    # After each plugin made its thing, say so and hang: the parent kills this engine there,
    # before the engine records anything.
    for name in ("Local::Directory", "Local::File", "Local::Process", "PostgreSQL::Role"):
        base = type(normal.plugin(name))
        async def create(self, ctx, properties, _base=base):
            outcome = await _base.create(self, ctx, properties)
            (root / f"made-{ctx.resource_name}").touch()
            await asyncio.sleep(3600)
        registry.register(type("Hanging" + base.__name__, (base,), {"create": create}), type_name=name)
settings = EngineSettings(allowed_roots=(root,), sweep_interval=0.1, heartbeat_interval=0.2,
                          engine_stale_after=1.0)
template = {
    "heat_template_version": "2021-04-16",
    "parameters": {"role": {"type": "string"}, "url": {"type": "string"}},
    "resources": {
        "dir": {"type": "Local::Directory", "properties": {"path": "d"}},
        "file": {"type": "Local::File", "properties": {"path": "f.txt", "content": "hello"}},
        "proc": {"type": "Local::Process", "properties": {
            "command": [sys.executable, "-c", "import time; time.sleep(600)"],
            "startup_check_secs": 0.05, "stop_grace_secs": 1}},
        "role": {"type": "PostgreSQL::Role", "properties": {
            "name": {"get_param": "role"}, "server_url": {"get_param": "url"}}},
    },
}
async def main():
    async with Converge.embedded(root / "state.db", settings=settings, registry=registry) as cv:
        parameters = {"role": sys.argv[3], "url": sys.argv[4]}
        if crash:
            await cv.create_stack("crashy", template, parameters=parameters)
        else:
            view = await cv.update_stack("crashy", template, parameters=parameters)
            print(view.stack_status, view.stack_status_reason)
asyncio.run(main())
"""


async def test_an_engine_killed_mid_create_leaves_exactly_one_of_each_thing(
    root: Path, postgres_server: str
) -> None:
    role = f"cv_crash_{uuid.uuid4().hex[:8]}"
    program = root / "crash.py"
    program.write_text(textwrap.dedent(CRASHING))
    args = [PY, str(program), str(root)]
    crashing = subprocess.Popen([*args, "crash", role, postgres_server])
    try:
        made = [root / f"made-{name}" for name in ("dir", "file", "proc", "role")]
        await eventually(
            lambda: all(path.exists() for path in made) or crashing.poll() is not None, timeout=30
        )
        assert crashing.poll() is None, "the crashing engine ended by itself"
        crashing.send_signal(signal.SIGKILL)
        crashing.wait(10)
        again = subprocess.run(
            [*args, "resume", role, postgres_server], capture_output=True, text=True, timeout=60
        )
        assert again.returncode == 0, again.stderr
        assert again.stdout.startswith("UPDATE_COMPLETE"), again.stdout
        assert (root / "d").is_dir() and (root / "f.txt").read_text() == "hello"
        assert sorted(p.name for p in root.iterdir() if p.name.startswith(".")) == []
        assert len(marked(root)) == 1
        with psycopg.connect(postgres_server) as conn:
            count = conn.execute("SELECT count(*) FROM pg_roles WHERE rolname = %s", (role,))
            assert count.fetchone() == (1,)
    finally:
        crashing.kill()
        crashing.wait(10)
        for identity in marked(root):
            os.killpg(identity.pid, signal.SIGKILL)
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


async def test_postgres_drift_is_reported_and_converged_back(
    cv: Converge, postgres_server: str
) -> None:
    name = f"cv_drift_{uuid.uuid4().hex[:8]}"
    stack = {
        "heat_template_version": "2021-04-16",
        "resources": {
            "role": {
                "type": "PostgreSQL::Role",
                "properties": {"server_url": postgres_server, "name": name, "login": True},
            },
            "db": {
                "type": "PostgreSQL::Database",
                "properties": {
                    "server_url": postgres_server,
                    "name": name,
                    "owner": {"get_resource": "role"},
                },
            },
        },
    }
    try:
        created = await cv.create_stack("pg", stack)
        assert created.stack_status == "CREATE_COMPLETE", created.stack_status_reason
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(name)))
            conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(name)))
        await cv.check_stack("pg")
        drift = {view.resource_name: view for view in await cv.drift("pg")}
        assert drift["role"].drift_status == "MODIFIED"
        assert drift["role"].drift_detail == {"login": {"wanted": True, "found": False}}
        assert drift["db"].drift_status == "DELETED"

        fixed = await cv.update_stack("pg", existing=True, converge=True)
        assert fixed.stack_status == "UPDATE_COMPLETE", fixed.stack_status_reason
        with psycopg.connect(postgres_server) as conn:
            row = conn.execute(
                "SELECT r.rolcanlogin, pg_get_userbyid(d.datdba) FROM pg_roles r, pg_database d "
                "WHERE r.rolname = %s AND d.datname = %s",
                (name, name),
            ).fetchall()
        assert row == [(True, name)]
        await cv.delete_stack("pg")
    finally:
        with psycopg.connect(postgres_server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))
