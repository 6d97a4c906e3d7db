"""Options for shared state: a database URL as --state, a broker, serve's roles and workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from converge.adapters.urls import without_password
from converge.cli.inputs import embedded_settings
from converge.cli.main import main
from converge.resources.builtin.world import SETTING

PG = "postgresql://app:s3cret@db.example:5432/converge"
BROKER = "amqp://guest:guest@mq.example/"


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env=env or {})
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (BROKER, "amqp://guest@mq.example/"),
        (PG, "postgresql://app@db.example:5432/converge"),
        ("postgresql://db.example/converge", "postgresql://db.example/converge"),
        ("amqp://user:p@ss@host/vhost", "amqp://user@host/vhost"),  # '@' in the password
        ("state.db", "state.db"),
    ],
)
def test_urls_are_shown_without_their_password(url: str, shown: str) -> None:
    assert without_password(url) == shown


def test_workers_need_a_broker() -> None:
    code, output = _run("serve", "--workers", "2", "--state", PG)
    assert code == 2 and "--workers needs --broker" in output


def test_without_a_broker_serve_must_hold_the_worker_role() -> None:
    code, output = _run("serve", "--roles", "engine,observer", "--state", PG)
    assert code == 2 and "--roles must include worker" in output


def test_unknown_roles_are_named() -> None:
    code, output = _run("serve", "--roles", "engine,sweeper", "--broker", BROKER)
    assert code == 2 and "sweeper: choose from engine,worker,observer" in output


def test_state_maintenance_is_for_files() -> None:
    code, output = _run("state", "backup", "copy.db", "--state", PG)
    assert code == 2 and "pg_dump" in output
    assert "s3cret" not in output


def test_a_database_url_allows_only_the_roots_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONVERGE_ALLOWED_ROOTS", raising=False)
    monkeypatch.delenv("CONVERGE_TEST_WORLD", raising=False)
    bare = embedded_settings(PG)
    assert bare.allowed_roots == () and SETTING not in bare.plugin_settings
    monkeypatch.setenv("CONVERGE_ALLOWED_ROOTS", f"{tmp_path / 'a'}:{tmp_path / 'b'}")
    monkeypatch.setenv("CONVERGE_TEST_WORLD", str(tmp_path / "world.db"))
    given = embedded_settings(PG)
    assert given.allowed_roots == (tmp_path / "a", tmp_path / "b")
    assert given.plugin_settings[SETTING] == str(tmp_path / "world.db")
    # A state file keeps its own directory as the root.
    assert embedded_settings(str(tmp_path / "s.db")).allowed_roots == (tmp_path,)


@pytest.mark.parametrize("option", ["--concurrency", "--prefetch"])
def test_concurrency_and_prefetch_are_at_least_one(option: str) -> None:
    code, output = _run("serve", option, "0", "--broker", BROKER)
    assert code == 2 and option in output


def test_worker_processes_run_with_serve_s_concurrency() -> None:
    from converge.cli.serve import worker_options

    assert worker_options(concurrency=200, prefetch=100, debug=True, log_json=False) == [
        "--concurrency",
        "200",
        "--prefetch",
        "100",
        "--debug",
    ]
    assert worker_options(concurrency=None, prefetch=None, debug=False, log_json=False) == []
