"""A damaged, full, empty or read-only state file, through the CLI as a user meets it.

Each case must end within seconds with exit 5, the file's path and the reason, and leave
nothing half-done. The commands run in real processes: the bugs these tests hold off
were runs that never ended.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from converge.cli.main import main

TEMPLATE = """\
heat_template_version: 2018-08-31
resources:
  first:
    type: OS::Heat::TestResource
    properties:
      value: hi
  second:
    type: OS::Heat::None
    depends_on: first
outputs:
  said:
    value: {get_attr: [first, output]}
"""

_PROGRAM = "from converge.cli.main import main\nmain()\n"
# Generous for a loaded machine; the bugs were runs that never ended at all.
SECONDS = 45.0


class Ran:
    def __init__(self, process: subprocess.CompletedProcess[str], seconds: float) -> None:
        self.code = process.returncode
        self.stdout = process.stdout
        self.stderr = process.stderr
        self.seconds = seconds

    def json(self) -> object:
        return json.loads(self.stdout)


def converge(*args: str, cwd: Path, timeout: float = SECONDS) -> Ran:
    """``converge ARGS`` in its own process; a run that does not end fails the test."""
    started = time.monotonic()
    try:
        process = subprocess.run(
            [sys.executable, "-c", _PROGRAM, *args],
            cwd=cwd,
            env={k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stderr or b"")[-1500:]
        pytest.fail(f"converge {' '.join(args)} did not end within {timeout} s: ...{tail!r}")
    return Ran(process, time.monotonic() - started)


def cli(*args: str, cwd: Path) -> Ran:
    """``converge ARGS`` in this process (cheaper), for runs that cannot hang."""
    started = time.monotonic()
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(previous)
    process = subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)
    return Ran(process, time.monotonic() - started)


@pytest.fixture(scope="module")
def made_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state holding stack ``t`` (made once; each test works on its own copy)."""
    directory = tmp_path_factory.mktemp("made")
    (directory / "t.yaml").write_text(TEMPLATE)
    applied = cli("apply", "t.yaml", "--state", "s.db", "-f", "json", cwd=directory)
    assert applied.code == 0, applied.stderr
    return directory


@pytest.fixture
def workdir(made_state: Path, tmp_path: Path) -> Path:
    for path in made_state.iterdir():
        if path.is_file():
            shutil.copy2(path, tmp_path / path.name)
    return tmp_path


def zero_pages_of(state: Path, table: str, size: int = 8192) -> None:
    """Zero ``size`` bytes from the first page of ``table``'s b-tree (8 KB: two pages)."""
    with sqlite3.connect(state) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    conn.close()
    with state.open("r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(b"\0" * size)


def assert_state_error(ran: Ran, state: Path, reason: str) -> None:
    assert ran.code == 5, (ran.code, ran.stderr)
    assert f"error: state {state}: {reason}" in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr
    assert len(ran.stderr.splitlines()) <= 3, ran.stderr  # one error, not a stream of them


@pytest.mark.parametrize("command", [["apply", "t.yaml"], ["destroy", "t", "--yes"]])
def test_zeroed_pages_stop_apply_and_destroy_with_the_state_error(
    workdir: Path, command: list[str]
) -> None:
    state = workdir / "s.db"
    # The sync points' table: a traversal reads it in every worker and every sweep.
    zero_pages_of(state, "sync_report")
    ran = converge(*command, "--state", "s.db", cwd=workdir)
    assert_state_error(ran, state, "database disk image is malformed")
    assert "converge state check" in ran.stderr  # what to do next

    checked = cli("state", "check", "--state", "s.db", "-f", "json", cwd=workdir)
    assert checked.code == 5
    report = checked.json()
    assert isinstance(report, dict) and report["ok"] is False and report["problems"]


def test_serve_stops_on_a_damaged_state(workdir: Path) -> None:
    zero_pages_of(workdir / "s.db", "resource")  # what the sampler and the sweeper read
    ran = converge("serve", "--state", "s.db", "--interval", "0.2", cwd=workdir)
    assert ran.code == 5, ran.stderr
    assert f"error: state {workdir / 's.db'}: database disk image is malformed" in ran.stderr


def test_garbage_and_truncated_files_are_state_errors_not_bugs(workdir: Path) -> None:
    state = workdir / "s.db"
    clean = state.read_bytes()
    state.write_bytes(os.urandom(len(clean)))
    ran = cli("apply", "t.yaml", "--state", "s.db", cwd=workdir)
    assert_state_error(ran, state, "file is not a database")

    state.write_bytes(clean[: len(clean) // 2])
    for command in (["apply", "t.yaml"], ["show", "t"], ["destroy", "t", "--yes"]):
        ran = cli(*command, "--state", "s.db", cwd=workdir)
        assert_state_error(ran, state, "truncated: the file has")
    assert state.read_bytes() == clean[: len(clean) // 2]  # refused, never written to


def test_an_empty_file_is_refused_not_taken_for_a_new_state(workdir: Path) -> None:
    state = workdir / "empty.db"
    state.touch()
    ran = cli("apply", "t.yaml", "--state", "empty.db", cwd=workdir)
    assert_state_error(
        ran,
        state,
        "empty file: not a converge state; remove it if you mean to start over",
    )
    assert state.stat().st_size == 0
    assert not (workdir / "empty.db.world.db").exists()  # nothing was made


def test_a_new_state_and_its_directory_are_private(workdir: Path) -> None:
    ran = cli("apply", "t.yaml", "--state", "new/place/s.db", "-f", "json", cwd=workdir)
    assert ran.code == 0, ran.stderr
    created = workdir / "new" / "place"
    assert stat.S_IMODE(created.stat().st_mode) == 0o700
    for name in ("s.db", "s.db.world.db"):
        assert stat.S_IMODE((created / name).stat().st_mode) == 0o600, name

    backed_up = cli("state", "backup", "copy.db", "--state", "new/place/s.db", cwd=workdir)
    assert backed_up.code == 0, backed_up.stderr
    assert stat.S_IMODE((workdir / "copy.db").stat().st_mode) == 0o600


def test_backup_is_a_sound_copy_and_refuses_to_overwrite(workdir: Path) -> None:
    ran = cli("state", "backup", "copy.db", "--state", "s.db", cwd=workdir)
    assert ran.code == 0, ran.stderr
    shown = cli("show", "t", "--state", "copy.db", "-f", "json", cwd=workdir)
    assert shown.code == 0, shown.stderr
    assert shown.json()["stack_status"] == "CREATE_COMPLETE"  # type: ignore[index]
    checked = cli("state", "check", "--state", "copy.db", cwd=workdir)
    assert checked.code == 0 and "ok (schema" in checked.stdout, checked.stderr

    again = cli("state", "backup", "copy.db", "--state", "s.db", cwd=workdir)
    assert again.code == 4 and "already exists" in again.stderr and "--force" in again.stderr

    # A damaged state must not replace a good backup, even with --force.
    good = (workdir / "copy.db").read_bytes()
    zero_pages_of(workdir / "s.db", "resource")
    damaged = cli("state", "backup", "copy.db", "--force", "--state", "s.db", cwd=workdir)
    assert damaged.code == 5 and "no backup was written" in damaged.stderr, damaged.stderr
    assert (workdir / "copy.db").read_bytes() == good
    assert [p.name for p in workdir.iterdir() if p.name.endswith(".partial")] == []


def test_stack_not_found_names_the_state_searched(workdir: Path) -> None:
    ran = cli("show", "nope", "--state", "s.db", cwd=workdir)
    assert ran.code == 3
    assert f"stack 'nope' not found in {workdir / 's.db'}" in ran.stderr


def test_reading_commands_only_read_even_while_another_process_writes(workdir: Path) -> None:
    """No engine, service row, heartbeat or migration: a held write lock does not stop
    them (an engine would wait 30 s for it to register itself)."""
    writer = sqlite3.connect(workdir / "s.db", isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")
        for command in (["show", "t"], ["resources", "t"], ["events", "t"], ["outputs", "t"]):
            ran = cli(*command, "--state", "s.db", "-f", "json", cwd=workdir)
            assert ran.code == 0, (command, ran.stderr)
            assert ran.seconds < 10, (command, ran.seconds)
        listed = cli("list", "--state", "s.db", "-f", "json", cwd=workdir)
        assert [s["stack_name"] for s in listed.json()] == ["t"]  # type: ignore[attr-defined]
        assert writer.execute("SELECT count(*) FROM service").fetchone() == (0,)
    finally:
        writer.close()


# --- a read-only or full disk: made in a private mount namespace ---------------------


def _private_mounts() -> list[str]:
    """How to run a command with mounts of its own (root, or an unprivileged user
    namespace); skips the test when this machine allows neither."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare(1) to mount a read-only or a full disk privately")
    prefix = [unshare, "--mount"] if os.geteuid() == 0 else [unshare, "-r", "--mount"]
    probe = subprocess.run([*prefix, "mount", "-t", "tmpfs", "none", "/mnt"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount privately here ({probe.stderr.decode().strip()})")
    return prefix


def in_private_mounts(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``sh -c script`` with private mounts; ``$CONVERGE`` runs the command."""
    launcher = cwd / "converge.sh"
    launcher.write_text(
        f'#!/bin/sh\nexec {sys.executable} -c "from converge.cli.main import main; main()" "$@"\n'
    )
    launcher.chmod(0o755)
    try:
        return subprocess.run(
            [*_private_mounts(), "sh", "-euc", script],
            cwd=cwd,
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith("CONVERGE_")},
                "CONVERGE": str(launcher),
            },
            capture_output=True,
            text=True,
            timeout=4 * SECONDS,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"did not end: ...{(exc.stderr or b'')[-1500:]!r}")


def test_reading_commands_work_on_a_read_only_disk_and_apply_says_why_not(
    workdir: Path,
) -> None:
    (workdir / "disk").mkdir()
    for name in ("s.db", "s.db.world.db"):
        shutil.move(workdir / name, workdir / "disk" / name)
    ran = in_private_mounts(
        "mount --bind disk disk && mount -o remount,ro,bind disk\n"
        "$CONVERGE show t --state disk/s.db -f json > show.json\n"
        "set +e; $CONVERGE apply t.yaml --state disk/s.db; echo $? > apply.code\n",
        workdir,
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads((workdir / "show.json").read_text())["stack_status"] == "CREATE_COMPLETE"
    assert (workdir / "apply.code").read_text().strip() == "5"
    assert f"error: state {workdir / 'disk' / 's.db'}: unable to open database file" in ran.stderr
    assert "is read-only" in ran.stderr


BIG = "heat_template_version: 2018-08-31\nresources:\n" + "".join(
    f"  r{i}:\n    type: OS::Heat::TestResource\n    properties:\n      value: {'x' * 3000}{i}\n"
    for i in range(40)
)


def test_a_full_disk_stops_apply_and_leaves_no_stack_without_its_template(
    workdir: Path,
) -> None:
    """A full disk ends the run at once with exit 5 (it retried forever). When the big
    template does not fit, no stack is left behind without it (the next apply met such
    a stack and exited 70); when the traversal's writes do not fit, the next apply, with
    space freed, finishes the stack (its write-ahead logs take about 4 MB: the disk has 8;
    at 4 MB it fit only until the schema grew by a table)."""
    (workdir / "big.yaml").write_text(BIG)
    (workdir / "disk").mkdir()
    for name in ("s.db", "s.db.world.db"):
        shutil.move(workdir / name, workdir / "disk" / name)
    ran = in_private_mounts(
        "cp -r disk saved && mount -t tmpfs -o size=8m none disk && cp saved/* disk/\n"
        "fill() { dd if=/dev/zero of=disk/filler bs=4096 2>/dev/null"
        " count=$(( ($(df -k --output=avail disk | tail -1) - $1) / 4 )); }\n"
        "set +e\n"
        "fill 96; $CONVERGE apply big.yaml --state disk/s.db; echo $? > template.code\n"
        "rm disk/filler; $CONVERGE show big --state disk/s.db; echo $? > show.code\n"
        "fill 200; start=$(date +%s)\n"
        "$CONVERGE apply big.yaml --state disk/s.db; echo $? > traversal.code\n"
        "echo $(( $(date +%s) - start )) > traversal.seconds\n"
        "set -e; rm disk/filler\n"
        "$CONVERGE apply big.yaml --state disk/s.db -f json > after.json\n",
        workdir,
    )
    state = workdir / "disk" / "s.db"
    assert (workdir / "template.code").read_text().strip() == "5", ran.stderr
    assert (workdir / "show.code").read_text().strip() == "3", ran.stderr  # no stack
    assert (workdir / "traversal.code").read_text().strip() == "5", ran.stderr
    assert int((workdir / "traversal.seconds").read_text()) < SECONDS
    full = f"error: state {state}: database or disk is full: free space on the disk"
    assert ran.stderr.count(full) == 2, ran.stderr
    assert "Traceback" not in ran.stderr and "check failed" not in ran.stderr
    assert ran.returncode == 0, ran.stderr  # the apply after freeing space
    assert json.loads((workdir / "after.json").read_text())["stack_status"] == "UPDATE_COMPLETE"


def test_reading_an_older_schema_asks_for_an_upgrade_and_writes_nothing(workdir: Path) -> None:
    import sqlalchemy
    from alembic import command
    from alembic.config import Config

    from converge.adapters.sql.migrations import SCHEMA_HEAD, SCHEMA_REVISIONS
    from converge.adapters.sql.store import MIGRATIONS

    state = workdir / "s.db"
    older = SCHEMA_REVISIONS[-2]
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    engine = sqlalchemy.create_engine(f"sqlite:///{state}")
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, older)
    engine.dispose()
    before = state.read_bytes()

    ran = cli("show", "t", "--state", "s.db", cwd=workdir)
    assert ran.code == 5
    assert f"the schema is {older} and this converge needs {SCHEMA_HEAD}" in ran.stderr
    assert "`converge state upgrade`" in ran.stderr
    assert state.read_bytes() == before  # a reading command never migrates

    upgraded = cli("state", "upgrade", "--state", "s.db", cwd=workdir)
    assert upgraded.code == 0 and f"schema {older} upgraded to {SCHEMA_HEAD}" in upgraded.stdout
    assert cli("show", "t", "--state", "s.db", cwd=workdir).code == 0
