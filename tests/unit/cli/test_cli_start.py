"""``converge validate`` starts without the engine, the store and the terminal display,
and reads the plugins' schemas without loading what their actions need."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# What only the other commands need; validate imported all of it through the group.
HEAVY = ("rich", "sqlalchemy", "alembic", "converge.api", "converge.cli.stack_commands")

# What only a resource's actions need (event loop, test world's SQLite store, inotify,
# PostgreSQL driver, process control); validate imported them with the plugins' schemas.
ACTIONS_ONLY = (
    "asyncio",
    "sqlite3",
    "asyncinotify",
    "psycopg",
    "logging",
    "converge.sqlite_inline",
    "converge.resources.builtin.world",
    "converge.resources.local.process_control",
    "converge.resources.local.watch",
)

# Between them the plugin families: built-in test types, Local::*, groups, CFN. Not
# PostgreSQL's: a template using it imports psycopg at validation on purpose (a missing
# driver is an install hint there, ``ResourcePlugin.missing_package``), and psycopg asyncio.
FAMILIES = ("hello.yaml", "quickstart.yaml", "group.yaml", "cfn.yaml")

PROGRAM = """
import json, sys
from converge.cli.main import main
sys.argv = ["converge", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""


def _run(*args: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, "-c", PROGRAM, *args], capture_output=True, text=True, check=True
    )
    return json.loads(result.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def test_validate_imports_nothing_heavy() -> None:
    report = _run("validate", str(EXAMPLES / "hello.yaml"))
    assert report["code"] in (0, None)
    loaded = [name for name in HEAVY if name in report["modules"]]  # type: ignore[operator]
    assert loaded == []


def test_validate_reads_plugin_schemas_without_what_their_actions_need() -> None:
    report = _run("validate", *(str(EXAMPLES / name) for name in FAMILIES))
    assert report["code"] in (0, None)
    modules = report["modules"]
    assert "converge.resources.local.process" in modules  # type: ignore[operator]
    loaded = [name for name in ACTIONS_ONLY if name in modules]  # type: ignore[operator]
    assert loaded == []


# Types a template does not use are not imported at all (the registry loads on first use).
OTHER_FAMILIES = (
    "converge.resources.local.directory",
    "converge.resources.local.file",
    "converge.resources.local.process",
    "converge.resources.postgres.role",
    "converge.resources.postgres.database",
    "converge.resources.group",
    "converge.resources.builtin.dummy",
)


def test_validate_imports_only_the_types_the_template_uses() -> None:
    report = _run("validate", str(EXAMPLES / "hello.yaml"))
    assert report["code"] in (0, None)
    modules = report["modules"]
    loaded = [name for name in OTHER_FAMILIES if name in modules]  # type: ignore[operator]
    assert loaded == []


def test_other_commands_and_help_still_load_everything() -> None:
    report = _run("--help")
    assert "converge.cli.stack_commands" in report["modules"]  # type: ignore[operator]
