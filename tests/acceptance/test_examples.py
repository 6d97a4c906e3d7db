"""The examples and the real resource types end to end: files, processes, PostgreSQL.

Scenarios assert on reality (what is served, what runs, what the catalog holds), not on the
engine's records. Every scenario destroys what it made.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

from converge.cli.main import main
from converge.resources.local import procfs

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
Run = Callable[..., Result]


def free_port() -> int:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        return int(listener.getsockname()[1])


def wait_until(condition: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(0.05)


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    group = main
    runner = CliRunner()
    state = str(tmp_path / "state.db")
    applied: list[str] = []

    def invoke(*args: str) -> Result:
        if args[0] == "apply":
            applied.append(args[1])
        return runner.invoke(group, [*args, "--state", state], catch_exceptions=False)

    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield invoke
    finally:
        for name in {Path(template).stem for template in applied}:
            runner.invoke(group, ["destroy", name, "-y", "--state", state])
        os.chdir(previous)


def outputs_of(result: Result) -> dict[str, Any]:
    document = json.loads(result.stdout)
    return {item["output_key"]: item["output_value"] for item in document["outputs"]}


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as response:
        return str(response.read().decode())


def test_quickstart_serves_its_directory_and_destroy_removes_everything(
    run: Run, tmp_path: Path
) -> None:
    port = free_port()
    result = run("apply", str(EXAMPLES / "quickstart.yaml"), "-P", f"port={port}", "-f", "json")
    assert result.exit_code == 0, result.stderr
    outputs = outputs_of(result)
    assert outputs["url"] == f"http://127.0.0.1:{port}/"
    assert "Hello from converge" in wait_until(lambda: _try_fetch(outputs["url"]))
    config = Path(outputs["config_file"])
    assert config == tmp_path / "quickstart" / "app.conf"
    assert oct(config.stat().st_mode & 0o777) == "0o600"
    secret = config.read_text().split("secret = ")[1].strip()
    assert len(secret) == 24
    pid = int(outputs["pid"])
    assert procfs.read(pid) is not None

    # The secret is in the file the template asked for, and nowhere converge shows things.
    for command in (("show", "quickstart"), ("events", "quickstart"), ("resources", "quickstart")):
        shown = run(*command, "-f", "json")
        assert shown.exit_code == 0, shown.stderr

    # Behind converge's back: the server killed, the page edited, the config deleted.
    page = tmp_path / "quickstart" / "www" / "index.html"
    original = page.read_text()
    os.kill(pid, 9)
    page.write_text("defaced\n")
    config.unlink()
    wait_until(lambda: procfs.read(pid) is None)
    checked = run("check", "quickstart", "-f", "json")
    assert checked.exit_code == 0, checked.stderr
    drift = {r["resource_name"]: r for r in json.loads(checked.stdout)["resources"]}
    assert {name: r["drift_status"] for name, r in drift.items()} == {
        "home": "IN_SYNC",
        "site": "IN_SYNC",
        "secret": "IN_SYNC",
        "page": "MODIFIED",
        "config": "DELETED",
        "web": "DELETED",
    }
    assert set(drift["page"]["drift_detail"]) == {"content_sha256"}
    assert "\n+defaced" in drift["page"]["drift_diff"]["content_sha256"]  # not two hashes

    fixed = run(
        "apply", str(EXAMPLES / "quickstart.yaml"), "-P", f"port={port}", "--converge", "-f", "json"
    )
    assert fixed.exit_code == 0, fixed.stderr
    assert page.read_text() == original
    assert config.read_text().split("secret = ")[1].strip() == secret  # the same secret
    pid = int(outputs_of(fixed)["pid"])
    assert "Hello from converge" in wait_until(lambda: _try_fetch(outputs["url"]))

    destroyed = run("destroy", "quickstart", "-y")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert procfs.read(pid) is None
    assert not (tmp_path / "quickstart").exists()


def test_quickstart_on_a_taken_port_fails_with_the_servers_error(run: Run) -> None:
    # Someone else serves on the port: the web server dies at once, and apply says so.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run("apply", str(EXAMPLES / "quickstart.yaml"), "-P", f"port={port}")
    assert result.exit_code != 0
    assert "CREATE_COMPLETE" not in result.stdout.splitlines()[-1]
    assert "web: " in result.stderr and "Address already in use" in result.stderr


def test_provider_example_makes_nested_stacks(run: Run) -> None:
    provider = EXAMPLES / "provider"
    result = run(
        "apply", str(provider / "stack.yaml"), "-e", str(provider / "env.yaml"), "-f", "json"
    )
    assert result.exit_code == 0, result.stderr
    outputs = outputs_of(result)
    assert outputs["web_address"].startswith("10.") and outputs["db_address"].startswith("10.")
    listed = json.loads(run("list", "--nested", "-f", "json").stdout)
    owner = next(s for s in listed if s["stack_name"] == "stack")
    nested = {s["stack_name"].split("-")[1]: s for s in listed if s["parent"] == owner["id"]}
    assert set(nested) == {"web", "db"}
    shown = json.loads(run("show", nested["db"]["stack_name"], "-f", "json").stdout)
    assert shown["parameters"]["role"] == "database"
    destroyed = run("destroy", "stack", "-y")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert json.loads(run("list", "--nested", "-f", "json").stdout) == []


def _try_fetch(url: str) -> str | None:
    try:
        return fetch(url)
    except OSError:
        return None


@pytest.fixture
def pg_names(postgres_server: str) -> Iterator[list[str]]:
    used: list[str] = []
    yield used
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        for name in used:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def catalog(url: str, query: str, *args: object) -> list[tuple[Any, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(query, args).fetchall()


def test_postgres_app_runs_against_its_own_role_and_database(
    run: Run, tmp_path: Path, postgres_server: str, pg_names: list[str]
) -> None:
    name = f"cv_app_{uuid.uuid4().hex[:8]}"
    pg_names.append(name)
    result = run(
        "apply",
        str(EXAMPLES / "postgres-app.yaml"),
        "-P",
        f"server_url={postgres_server}",
        "-P",
        f"app_name={name}",
        "-f",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    assert catalog(
        postgres_server,
        "SELECT r.rolcanlogin, r.rolconnlimit, pg_get_userbyid(d.datdba) FROM pg_roles r, "
        "pg_database d WHERE r.rolname = %s AND d.datname = %s",
        name,
        name,
    ) == [(True, 5, name)]
    url_file = Path(outputs_of(result)["database_url_file"])
    password = url_file.read_text().split(":")[2].split("@")[0]
    assert url_file.read_text().startswith(f"postgresql://{name}:") and len(password) == 20
    log = tmp_path / "postgres-app" / "app.log"
    # The app logs the heartbeat count it read back from its database.
    wait_until(lambda: log.exists() and any(word.isdigit() for word in log.read_text().split()))
    with psycopg.connect(postgres_server.rsplit("/", 1)[0] + f"/{name}") as conn:
        assert conn.execute("SELECT count(*) FROM beat").fetchone()[0] >= 1  # type: ignore[index]

    # The role's password is hidden: never in show, events or the role's shown properties
    # (the RandomString that made it shows its value attribute, as in Heat).
    for command in (("show", "postgres-app"), ("events", "postgres-app")):
        shown = run(*command, "-f", "json")
        assert shown.exit_code == 0, shown.stderr
        assert password not in shown.stdout
    listed = run("resources", "postgres-app", "-f", "json")
    role = next(r for r in json.loads(listed.stdout) if r["resource_name"] == "role")
    assert password not in json.dumps(role)

    destroyed = run("destroy", "postgres-app", "-y")
    assert destroyed.exit_code == 0, destroyed.stderr
    assert catalog(postgres_server, "SELECT 1 FROM pg_roles WHERE rolname = %s", name) == []
    assert catalog(postgres_server, "SELECT 1 FROM pg_database WHERE datname = %s", name) == []


BAD = """\
heat_template_version: 2021-04-16
resources:
  outside:
    type: Local::File
    properties: {{path: {path}, content: x}}
"""


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/etc/converge-test", "'/etc/converge-test' is outside the allowed roots"),
        ("../escape.txt", "'../escape.txt' resolves to"),
        ("link/inside.txt", "'link/inside.txt' resolves to"),
    ],
)
def test_paths_outside_the_allowed_roots_are_refused_before_anything_is_made(
    run: Run, tmp_path: Path, path: str, expected: str
) -> None:
    elsewhere = tmp_path.parent / f"elsewhere-{uuid.uuid4().hex[:6]}"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    (tmp_path / "bad.yaml").write_text(BAD.format(path=path))
    result = run("apply", "bad.yaml")
    assert result.exit_code != 0
    assert "resources.outside.properties.path" in result.stderr
    assert expected in result.stderr
    assert not list(elsewhere.iterdir()) and not (tmp_path.parent / "escape.txt").exists()
    assert "no stack" in run("show", "bad").stderr.lower() or run("show", "bad").exit_code != 0


def test_a_command_that_does_not_exist_is_refused_at_validation(run: Run, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "heat_template_version: 2021-04-16\nresources:\n  svc:\n    type: Local::Process\n"
        "    properties: {command: [no-such-daemon-xyz, --serve]}\n"
    )
    result = run("apply", "bad.yaml")
    assert result.exit_code != 0
    assert "resources.svc.properties.command: command 'no-such-daemon-xyz' was not found" in (
        result.stderr
    )


def test_a_postgres_server_that_is_down_fails_clearly_and_leaves_nothing(
    run: Run, tmp_path: Path
) -> None:
    (tmp_path / "down.yaml").write_text(
        "heat_template_version: 2021-04-16\nresources:\n"
        "  dir: {type: Local::Directory, properties: {path: made-first}}\n"
        "  role:\n    type: PostgreSQL::Role\n    depends_on: dir\n"
        "    properties: {server_url: 'postgresql://postgres:pw-hidden@127.0.0.1:1/postgres',"
        " password: also-hidden}\n"
    )
    result = run("apply", "down.yaml")
    assert result.exit_code != 0
    assert (
        "resources.role: role: PostgreSQL server postgresql://postgres:***@127.0.0.1:1/postgres is not reachable"
        in result.stderr
    )
    assert "pw-hidden" not in result.stderr + result.stdout
    assert "also-hidden" not in result.stderr + result.stdout
    assert not (tmp_path / "made-first").exists()  # rolled back: nothing half-made


def test_the_conditions_example_with_its_prod_environment_can_be_destroyed(
    tmp_path: Path,
) -> None:
    # Its environment sets parameters and pauses `backup` before create: the apply runs
    # in its own process while this one clears the hook, as a user would.
    converge = str(Path(sys.executable).parent / "converge")
    env = {**os.environ, "CONVERGE_STATE": str(tmp_path / "state.db")}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [converge, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )

    applying = subprocess.Popen(
        [
            converge,
            "apply",
            str(EXAMPLES / "conditions.yaml"),
            "-e",
            str(EXAMPLES / "conditions-prod.env.yaml"),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert applying.stdout is not None
        # Plain progress says how to resume the paused resource: do as it says.
        for line in applying.stdout:
            if "to resume:" in line:
                assert line.split("to resume: ")[1].split() == [
                    "converge",
                    "hook",
                    "clear",
                    "conditions",
                    "backup",
                    "pre-create",
                ]
                break
        cleared = cli("hook", "clear", "conditions", "backup", "pre-create")
        assert cleared.returncode == 0, cleared.stderr
        out, err = applying.communicate(timeout=120)
    finally:
        if applying.poll() is None:
            applying.kill()
            applying.communicate()
    assert applying.returncode == 0, err
    assert "Stack conditions CREATE_COMPLETE" in out

    destroyed = cli("destroy", "conditions", "-y")
    assert destroyed.returncode == 0, destroyed.stderr
    assert "Stack conditions DELETE_COMPLETE" in destroyed.stdout
