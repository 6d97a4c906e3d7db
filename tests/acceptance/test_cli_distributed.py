"""The real command line over PostgreSQL and RabbitMQ: `converge serve` processes do the work,
`converge apply` and `destroy` start operations and follow them.

Each test has a database and a broker namespace of its own; the serving processes are
started as a user would (`converge serve --roles worker --workers 2`, and an engine).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import IO

import psycopg
import pytest

from support.distributed import Deployment, alive

pytestmark = [pytest.mark.postgres, pytest.mark.rabbitmq]

TEMPLATE = """\
heat_template_version: 2021-04-16
parameters:
  root: {type: string}
  text: {type: string, default: hello}
resources:
  marker: {type: OS::Heat::None}
  slow:
    type: OS::Heat::TestResource
    properties: {value: {get_param: text}, wait_secs: 0.5}
  copy:
    type: OS::Heat::Value
    properties: {value: {get_attr: [slow, output]}}
  file:
    type: Local::File
    properties:
      path: {list_join: ['/', [{get_param: root}, 'out.txt']]}
      content: {get_attr: [copy, value]}
outputs:
  text: {value: {get_attr: [copy, value]}}
"""


def test_serving_processes_do_the_work_of_apply_update_and_destroy(
    deployment: Deployment,
) -> None:
    root = deployment.directory
    (root / "stack.yaml").write_text(TEMPLATE)
    engine = deployment.serve("--roles", "engine")
    workers = deployment.serve("--roles", "worker", "--workers", "2")
    worker_pids = deployment.wait_for("worker", 2)
    deployment.wait_for("engine", 1)
    # Roles as asked: two worker-only processes, one engine, and nothing else registered
    # (the supervising serve holds no role; no one here observes).
    assert sorted(roles for _, roles in deployment.services()) == [
        ("engine",),
        ("worker",),
        ("worker",),
    ]

    created = deployment.converge("apply", "stack.yaml", "-P", f"root={root}", "-f", "json")
    assert created.returncode == 0, created.stderr
    stack = json.loads(created.stdout)
    assert stack["stack_status"] == "CREATE_COMPLETE"
    assert stack["outputs"][0]["output_value"] == "hello"
    assert (root / "out.txt").read_text() == "hello"
    ids = {r["resource_name"]: r["physical_resource_id"] for r in stack["resources"]}

    # A worker killed outright is started again by its serve.
    os.kill(worker_pids[0], signal.SIGKILL)
    worker_pids = deployment.wait_for_new("worker", worker_pids)

    updated = deployment.converge(
        "apply", "stack.yaml", "-P", f"root={root}", "-P", "text=bye", "-f", "json"
    )
    assert updated.returncode == 0, updated.stderr
    stack = json.loads(updated.stdout)
    assert stack["stack_status"] == "UPDATE_COMPLETE"
    assert (root / "out.txt").read_text() == "bye"
    after = {r["resource_name"]: r["physical_resource_id"] for r in stack["resources"]}
    assert after["marker"] == ids["marker"] and after["file"] == ids["file"]  # kept

    shown = deployment.converge("show", "stack", "-f", "value", "-c", "stack_status")
    assert shown.stdout.strip() == "UPDATE_COMPLETE", shown.stderr
    (root / "out.txt").write_text("changed by hand")
    checked = deployment.converge("check", "stack", "-f", "json")  # by the workers
    assert checked.returncode == 0, checked.stderr
    drift = {r["resource_name"]: r["drift_status"] for r in json.loads(checked.stdout)["resources"]}
    assert drift == {"marker": "IN_SYNC", "slow": "IN_SYNC", "copy": "IN_SYNC", "file": "MODIFIED"}

    deleted = deployment.converge("destroy", "stack", "--yes", "-f", "json")
    assert deleted.returncode == 0, deleted.stderr
    assert json.loads(deleted.stdout)["stack_status"] == "DELETE_COMPLETE"
    assert not (root / "out.txt").exists()

    # SIGTERM stops serve and the worker processes it started.
    assert "2 worker processes" in workers.stop()
    assert not any(alive(pid) for pid in worker_pids)
    # No trigger was lost: the engine's sweeper had nothing to push on.
    assert "sweeper rescues: 0" in engine.stop()
    assert deployment.services() == []


def test_apply_says_so_when_no_worker_is_alive(deployment: Deployment) -> None:
    (deployment.directory / "stack.yaml").write_text(
        "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n"
    )
    engine = deployment.serve("--roles", "engine,observer")  # alive, but no worker
    deployment.wait_for("engine", 1)
    refused = deployment.converge("apply", "stack.yaml")
    assert refused.returncode == 7, refused.stderr
    assert "no converge worker is alive" in refused.stderr
    assert "guest@" in refused.stderr and "guest:guest" not in refused.stderr  # no password
    listed = deployment.converge("list", "-f", "json")
    assert json.loads(listed.stdout) == []  # nothing was started
    # A CHECK is a traversal too: the workers observe.
    unchecked = deployment.converge("check", "stack")
    assert unchecked.returncode == 7, unchecked.stderr
    assert "no converge worker is alive" in unchecked.stderr
    engine.stop()


def test_a_command_says_which_host_has_no_worker_for_its_local_resources(
    deployment: Deployment,
) -> None:
    """The stack's file lives on this host; the only live worker is on another one: the
    work would wait in this host's queue forever, so the commands refuse (exit 7), naming
    the host and the resource, and start nothing."""
    root = deployment.directory
    (root / "files.yaml").write_text(
        "heat_template_version: 2021-04-16\nresources:\n"
        f"  note: {{type: Local::File, properties: {{path: '{root / 'note.txt'}', "
        "content: one}}\n"
        "  marker: {type: OS::Heat::None}\n"
    )
    here = socket.gethostname()
    worker = deployment.serve("--roles", "worker")
    deployment.wait_for("worker", 1)
    created = deployment.converge("apply", "files.yaml")
    assert created.returncode == 0, created.stderr
    worker.stop()
    # A worker of another machine, alive by its heartbeat.
    with psycopg.connect(deployment.database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO service (engine_id, host, pid, roles, started_at, heartbeat_at) "
            "VALUES (%s, 'elsewhere', 1, '[\"worker\"]', %s, %s)",
            (str(uuid.uuid4()), time.time(), time.time() + 600),
        )
    refusals = [
        deployment.converge("destroy", "files", "--yes", timeout=60),
        deployment.converge("check", "files", timeout=60),
        deployment.converge("apply", "files.yaml", "--name", "other", timeout=60),  # new: here
    ]
    named = f"no converge worker is alive on host {here}, where note of this operation"
    for refused in refusals:
        assert refused.returncode == 7, refused.stderr
        assert named in refused.stderr
        assert "workers are alive on elsewhere" in refused.stderr
    listed = deployment.converge("list", "-f", "json")
    assert [s["stack_name"] for s in json.loads(listed.stdout)] == ["files"]
    shown = deployment.converge("show", "files", "-f", "value", "-c", "stack_status")
    assert shown.stdout.strip() == "CREATE_COMPLETE", shown.stderr  # nothing was started
    assert (root / "note.txt").read_text() == "one"


def test_following_says_when_the_host_of_its_local_resources_has_no_worker(
    deployment: Deployment,
) -> None:
    """This host's only worker stops while the operation waits to make a file here; a
    worker elsewhere is alive: `apply` says which host lacks one, then that one is back,
    and the operation finishes there."""
    root = deployment.directory
    (root / "later.yaml").write_text(
        "heat_template_version: 2021-04-16\nresources:\n"
        "  slow: {type: OS::Heat::TestResource, properties: {wait_secs: 3}}\n"
        f"  note: {{type: Local::File, depends_on: slow, properties: {{path: "
        f"'{root / 'note.txt'}', content: one}}}}\n"
    )
    here = socket.gethostname()
    first = deployment.serve("--roles", "worker")
    deployment.wait_for("worker", 1)
    with psycopg.connect(deployment.database_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO service (engine_id, host, pid, roles, started_at, heartbeat_at) "
            "VALUES (%s, 'elsewhere', 1, '[\"worker\"]', %s, %s)",
            (str(uuid.uuid4()), time.time(), time.time() + 600),
        )
    with deployment.start_converge("apply", "later.yaml") as following:
        assert following.stdout is not None and following.stderr is not None
        _read_until(following, following.stdout, "slow  CREATE_IN_PROGRESS")
        first.stop()  # its unfinished check of slow goes back to the queue
        _read_until(
            following,
            following.stderr,
            f"no converge worker is alive on host {here}, where note of this operation is bound",
        )
        second = deployment.serve("--roles", "worker")
        _read_until(following, following.stderr, f"a worker is alive on host {here} again")
        following.wait(timeout=120)
        out, err = following.stdout.read(), following.stderr.read()
    assert following.returncode == 0, err
    assert "Stack later CREATE_COMPLETE" in out
    assert (root / "note.txt").read_text() == "one"
    second.stop()


def test_a_worker_restarted_mid_operation_finishes_it(deployment: Deployment) -> None:
    """The only worker stops while a resource is being created: `apply` says that no
    worker is alive, and once a new worker process starts, it carries the operation on."""
    (deployment.directory / "slow.yaml").write_text(
        "heat_template_version: 2021-04-16\nresources:\n"
        "  slow: {type: OS::Heat::TestResource, properties: {wait_secs: 3}}\n"
    )
    first = deployment.serve("--roles", "worker")
    deployment.wait_for("worker", 1)
    with deployment.start_converge("apply", "slow.yaml") as following:
        assert following.stdout is not None and following.stderr is not None
        _read_until(following, following.stdout, "slow  CREATE_IN_PROGRESS")
        first.stop()  # its unfinished check goes back to the broker's queue
        _read_until(following, following.stderr, "no converge worker is alive")
        second = deployment.serve("--roles", "worker")
        following.wait(timeout=120)  # little output: the pipes cannot fill meanwhile
        out, err = following.stdout.read(), following.stderr.read()
    assert following.returncode == 0, err
    assert "Stack slow CREATE_COMPLETE" in out
    second.stop()


def _read_until(
    process: subprocess.Popen[str], stream: IO[str] | None, text: str, timeout: float = 60.0
) -> None:
    """Read ``stream`` of ``process`` until a line holds ``text``; the process is killed
    (and the test fails) when it does not come within ``timeout`` seconds."""
    assert stream is not None
    found = threading.Event()

    def read() -> None:
        for line in stream:
            if text in line:
                found.set()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not found.is_set():
        process.kill()
        raise AssertionError(f"{text!r} not printed within {timeout} s")


def test_an_unreachable_broker_is_named_and_nothing_starts(
    postgres_url: str, tmp_path: Path
) -> None:
    """A broker that cannot be reached is what the command reports (not the missing
    workers it could not have asked about), with exit 7 and no password; nothing is stored,
    and `serve` refuses to start over it too."""
    nowhere = Deployment(postgres_url, "amqp://guest:guest@127.0.0.1:1/", "unused", tmp_path)
    (tmp_path / "stack.yaml").write_text(
        "heat_template_version: 2021-04-16\nresources:\n  a: {type: OS::Heat::None}\n"
    )
    refused = nowhere.converge("apply", "stack.yaml")
    assert refused.returncode == 7, refused.stderr
    assert refused.stderr.startswith("error: cannot reach the broker amqp://guest@127.0.0.1:1/")
    assert "guest:guest" not in refused.stderr and "worker" not in refused.stderr
    assert "nothing was started" in refused.stderr
    assert len(refused.stderr.splitlines()) == 1  # aiormq's own line is left out
    listed = nowhere.converge("list", "-f", "json")
    assert json.loads(listed.stdout) == []
    for command in (("check", "stack"), ("hook", "clear", "stack", "a", "pre-create")):
        unsent = nowhere.converge(*command)
        assert unsent.returncode == 7, unsent.stderr
        assert "cannot reach the broker amqp://guest@127.0.0.1:1/" in unsent.stderr
    for roles in ("engine", "worker"):  # a supervisor of workers alone starts none
        serve = nowhere.converge("serve", "--roles", roles, "--workers", "2", timeout=60)
        assert serve.returncode == 7, serve.stderr
        assert "cannot reach the broker amqp://guest@127.0.0.1:1/" in serve.stderr
        assert "worker process" not in serve.stderr
    assert nowhere.services() == []  # its service row went with it
