"""examples/group.yaml, applied through the CLI as its description says."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from converge.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "group.yaml"


def test_group_example_grows_retires_rolls_and_destroys(tmp_path: Path) -> None:
    runner = CliRunner()
    state = str(tmp_path / "state.db")

    def converge(*args: str) -> Any:
        result = runner.invoke(main, [*args, "--state", state], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    def apply(*parameters: str) -> dict[str, Any]:
        document = json.loads(converge("apply", str(EXAMPLE), *parameters, "-f", "json").stdout)
        return {item["output_key"]: item["output_value"] for item in document["outputs"]}

    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        first = apply()
        workers = tmp_path / "workers"
        assert sorted(p.name for p in workers.iterdir()) == [
            "worker-0.conf",
            "worker-1.conf",
            "worker-2.conf",
        ]
        assert (workers / "worker-2.conf").read_text() == "worker = 2\nsetting = fast\n"
        assert len(set(first["tokens"])) == 3

        second = apply("-P", "retire=1", "-P", "setting=slow")
        assert sorted(second["files"]) == ["0", "2", "3"]
        assert second["retired"] == ["1"]
        assert not (workers / "worker-1.conf").exists()
        assert (workers / "worker-3.conf").read_text() == "worker = 3\nsetting = slow\n"
        assert (workers / "worker-0.conf").read_text() == "worker = 0\nsetting = slow\n"
        # The tokens of the members that stayed were kept.
        assert second["tokens"][:2] == [first["tokens"][0], first["tokens"][2]]

        converge("destroy", "group", "-y")
        assert not workers.exists()
        assert json.loads(converge("list", "--nested", "-f", "json").stdout) == []
    finally:
        os.chdir(previous)
