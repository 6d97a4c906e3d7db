"""Chaos for a distributed deployment: a large stack of real things, a process killer, and
the comparison of reality (files, the test world) and the database with the template.

Shared by the chaos acceptance test and ``bench/bench_chaos.py``.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from support.distributed import Deployment, Serve, alive

TEST = "OS::Heat::TestResource"
NONE = "OS::Heat::None"
FILE = "Local::File"
NO_WORKER = 7  # converge's exit code: no worker is alive, nothing was started


@dataclass(frozen=True)
class Shape:
    """How many of each type: test resources in ``depth`` layers (each waits on one of the
    layer before), files depending on test resources, placeholders on files."""

    files: int = 150
    tests: int = 150
    nones: int = 200
    wait_secs: float = 0.1
    depth: int = 1

    @property
    def size(self) -> int:
        return self.files + self.tests + self.nones


@dataclass(frozen=True)
class Generation:
    """One version of the stack. ``number`` changes every value (in place) and, for every
    third test resource and every second file, a property that forces a replacement.
    ``fail`` makes ``t0`` fail its update after ``fail_after`` seconds."""

    number: int
    fail: bool = False
    fail_after: float = 3.0

    def value(self, index: int) -> str:
        return f"v{self.number}-{index}"

    def replace_token(self, index: int) -> str:
        return f"r{self.number if index % 3 == 0 else 0}"

    def file_name(self, index: int) -> str:
        return f"f{index}-{self.number if index % 2 == 0 else 0}.txt"


def template(shape: Shape, generation: Generation, root: Path) -> str:
    """The stack's template (JSON is YAML) for ``generation``."""
    resources: dict[str, object] = {}
    for index in range(shape.tests):
        properties: dict[str, object] = {
            "value": generation.value(index),
            "update_replace_value": generation.replace_token(index),
            "wait_secs": shape.wait_secs,
        }
        if generation.fail and index == 0:
            properties.update(fail=True, action_wait_secs={"update": generation.fail_after})
        resources[f"t{index}"] = {"type": TEST, "properties": properties}
        stride = max(1, shape.tests // shape.depth)
        if index >= stride:
            resources[f"t{index}"]["depends_on"] = [f"t{index - stride}"]
    for index in range(shape.files):
        resources[f"f{index}"] = {
            "type": FILE,
            "properties": {
                "path": str(root / "files" / generation.file_name(index)),
                "content": {"get_attr": [f"t{index % shape.tests}", "output"]},
            },
        }
    for index in range(shape.nones):
        resources[f"n{index}"] = {
            "type": NONE,
            "depends_on": [f"f{index % shape.files}"],
        }
    return json.dumps({"heat_template_version": "2021-04-16", "resources": resources})


def apply(
    deployment: Deployment, stack: str, shape: Shape, generation: Generation, *options: str
) -> subprocess.CompletedProcess[str]:
    """``converge apply`` of ``generation``; started again while it finds no live worker
    (exit 7: every worker was killed and is waiting out its restart pause), as a user
    would, for up to a minute."""
    root = deployment.directory
    (root / "stack.yaml").write_text(template(shape, generation, root))
    deadline = time.monotonic() + 60
    while True:
        done = deployment.converge("apply", "stack.yaml", "--name", stack, *options, timeout=600)
        if done.returncode != NO_WORKER or time.monotonic() > deadline:
            return done
        time.sleep(1)


def differences(
    deployment: Deployment, stack: str, shape: Shape, generation: Generation, status: str
) -> list[str]:
    """How reality and the rows differ from ``generation`` of the template (empty: none).

    Reality: exactly the files of the template, each with its content, nothing else in the
    directory (no leak); one test-world thing per test resource and per placeholder, the
    one its row names, with the template's value (nothing made twice). Rows: one per
    template resource, COMPLETE, and nothing else of the stack.
    """
    problems: list[str] = []
    expected_files = {
        generation.file_name(index): generation.value(index % shape.tests)
        for index in range(shape.files)
    }
    directory = deployment.directory / "files"
    found = {entry.name: entry for entry in directory.iterdir()} if directory.exists() else {}
    for name in sorted(set(found) - set(expected_files)):
        problems.append(f"leaked file {name}")
    for name, content in sorted(expected_files.items()):
        if name not in found:
            problems.append(f"missing file {name}")
        elif (text := found[name].read_text()) != content:
            problems.append(f"file {name} holds {text!r}, not {content!r}")

    with psycopg.connect(deployment.database_url, connect_timeout=5) as conn:
        stacks = conn.execute(
            "SELECT id, action || '_' || status FROM stack WHERE name = %s", (stack,)
        ).fetchall()
        if len(stacks) != 1:
            return [*problems, f"{len(stacks)} stacks named {stack}"]
        stack_id, stack_status = stacks[0]
        if stack_status != status:
            problems.append(f"stack is {stack_status}, not {status}")
        rows = conn.execute(
            "SELECT id, name, type, action, status, physical_resource_id FROM resource "
            "WHERE stack_id = %s ORDER BY name, id",
            (stack_id,),
        ).fetchall()
    by_name: dict[str, list[tuple[object, ...]]] = {}
    for row in rows:
        by_name.setdefault(str(row[1]), []).append(row)
    names = (
        {f"t{i}" for i in range(shape.tests)}
        | {f"f{i}" for i in range(shape.files)}
        | {f"n{i}" for i in range(shape.nones)}
    )
    for name in sorted(set(by_name) - names):
        problems.append(f"row of no template resource: {by_name[name]}")
    physical: dict[str, set[str]] = {TEST: set(), NONE: set()}
    for name in sorted(names):
        held = by_name.get(name, [])
        if len(held) != 1:
            problems.append(f"{len(held)} rows for {name}: {held}")
            continue
        _, _, type_name, action, row_status, physical_id = held[0]
        if row_status != "COMPLETE" or action == "DELETE" or not physical_id:
            problems.append(f"row of {name} is {action}_{row_status} ({physical_id})")
        if type_name in physical and physical_id:
            physical[str(type_name)].add(str(physical_id))

    world = _world(deployment.directory / "world.db")
    for type_name, ids in physical.items():
        things = world.get(type_name, {})
        for thing in sorted(set(things) - ids):
            problems.append(f"{type_name} {thing} exists in reality but no row holds it")
        for thing in sorted(ids - set(things)):
            problems.append(f"{type_name} {thing} of a row does not exist")
    values = {
        things["value"]
        for physical_id, things in world.get(TEST, {}).items()
        if physical_id in physical[TEST]
    }
    expected_values = {generation.value(index) for index in range(shape.tests)}
    if values != expected_values:
        problems.append(f"test values differ: {sorted(values ^ expected_values)[:10]}")
    return problems


def leftovers(deployment: Deployment) -> list[str]:
    """What is left of the stack after a destroy: files, test-world things (empty: none)."""
    directory = deployment.directory / "files"
    problems = [f"leaked file {entry.name}" for entry in sorted(directory.iterdir())]
    world = _world(deployment.directory / "world.db")
    for type_name in (TEST, NONE):
        problems.extend(f"leaked {type_name} {thing}" for thing in sorted(world.get(type_name, {})))
    return problems


def _world(path: Path) -> dict[str, dict[str, dict[str, object]]]:
    if not path.exists():
        return {}
    with sqlite3.connect(path, timeout=10) as conn:
        rows = conn.execute("SELECT type, physical_id, properties FROM entity").fetchall()
    world: dict[str, dict[str, dict[str, object]]] = {}
    for type_name, physical_id, properties in rows:
        world.setdefault(type_name, {})[physical_id] = json.loads(properties)
    return world


def start_engine(deployment: Deployment) -> Serve:
    return deployment.serve("--roles", "engine")


def start_cluster(deployment: Deployment) -> None:
    """Two engine processes (``serve --roles engine``) and three worker processes
    (``serve --roles worker --workers 2`` and ``--workers 1``), once registered; and the
    directory of the stack's files."""
    (deployment.directory / "files").mkdir()
    start_engine(deployment)
    start_engine(deployment)
    deployment.serve("--roles", "worker", "--workers", "2")
    deployment.serve("--roles", "worker", "--workers", "1")
    deployment.wait_for("worker", 3)
    deployment.wait_for("engine", 2)


@dataclass
class Kill:
    """One SIGKILL: whom, when, what it held, and when that work moved on (None: never
    measured, because it held nothing or the run ended first)."""

    role: str
    pid: int
    at: float
    claimed: int
    resumed_after: float | None = None


@dataclass
class Killer:
    """Kills a random worker or engine process every ``interval`` seconds (±50%) while it
    runs. Workers are restarted by their ``serve --workers``; engines are started again
    here at once."""

    deployment: Deployment
    interval: float = 3.0
    seed: int = 0
    kills: list[Kill] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _watchers: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Killer:
        self._thread = threading.Thread(target=self._run, name="chaos-killer", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for watcher in self._watchers:
            watcher.join()

    def _run(self) -> None:
        rng = random.Random(self.seed)
        while not self._stop.wait(self.interval * rng.uniform(0.5, 1.5)):
            victims = [
                (pid, engine_id, role)
                for pid, engine_id, roles in self._services()
                for role in ("worker", "engine")
                if role in roles and alive(pid)
            ]
            if not victims:
                continue
            pid, engine_id, role = rng.choice(victims)
            claimed = self._claimed(engine_id)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            kill = Kill(role, pid, time.monotonic(), len(claimed))
            self.kills.append(kill)
            if role == "engine":
                self._restart(pid)
            if claimed:
                watcher = threading.Thread(target=self._watch, args=(kill, engine_id, claimed))
                watcher.start()
                self._watchers.append(watcher)

    def _restart(self, pid: int) -> None:
        for serve in self.deployment.serving:
            if serve.process.pid == pid:
                serve.process.wait()
                serve.stream.close()
                self.deployment.serving.remove(serve)
                break
        start_engine(self.deployment)

    def _watch(self, kill: Kill, engine_id: str, claimed: set[int]) -> None:
        """Until no row the dead process held is still held by it: its work moved on."""
        while not self._stop.is_set() or time.monotonic() - kill.at < 120:
            if not self._claimed(engine_id) & claimed:
                kill.resumed_after = time.monotonic() - kill.at
                return
            if time.monotonic() - kill.at > 120:
                return
            time.sleep(0.1)

    def _services(self) -> list[tuple[int, str, tuple[str, ...]]]:
        with psycopg.connect(self.deployment.database_url, connect_timeout=5) as conn:
            rows = conn.execute("SELECT pid, engine_id, roles FROM service").fetchall()
        return [(pid, engine_id, tuple(roles)) for pid, engine_id, roles in rows]

    def _claimed(self, engine_id: str) -> set[int]:
        with psycopg.connect(self.deployment.database_url, connect_timeout=5) as conn:
            rows = conn.execute(
                "SELECT id FROM resource WHERE engine_id = %s", (engine_id,)
            ).fetchall()
        return {row[0] for row in rows}


def wait_for_progress(
    deployment: Deployment, stack: str, since: float, done: int, timeout: float = 60
) -> None:
    """Until ``done`` resources of ``stack`` finished an action (their events) since the
    wall-clock time ``since``: the operation is well under way."""
    deadline = time.monotonic() + timeout
    while True:
        with psycopg.connect(deployment.database_url, connect_timeout=5) as conn:
            row = conn.execute(
                "SELECT count(*) FROM event JOIN stack ON stack.id = event.stack_id "
                "WHERE stack.name = %s AND event.resource_name <> stack.name "
                "AND event.status = 'COMPLETE' AND event.created_at >= %s",
                (stack, since),
            ).fetchone()
        if row is not None and row[0] >= done:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"{stack}: {done} resources not done in {timeout} s")
        time.sleep(0.05)
