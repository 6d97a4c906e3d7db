"""``converge validate`` starts without the engine, the store and the terminal display."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# What only the other commands need; validate imported all of it through the group.
HEAVY = ("rich", "sqlalchemy", "alembic", "converge.api", "converge.cli.stack_commands")

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


def test_other_commands_and_help_still_load_everything() -> None:
    report = _run("--help")
    assert "converge.cli.stack_commands" in report["modules"]  # type: ignore[operator]
