"""examples/cfn.yaml, a CloudFormation-format template, validated and applied by the CLI.

Heat's CfnTemplate behaviours, asserted on the real files: Ref of a parameter and of a
resource, Fn::GetAtt, Fn::Join, Fn::FindInMap over Mappings, Fn::Replace, Fn::Select of a
CommaDelimitedList, Fn::If, AWS::StackName, and a resource and an output whose Condition
switches with a parameter.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from converge.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cfn.yaml"


def test_cfn_example_validates() -> None:
    result = CliRunner().invoke(main, ["validate", str(EXAMPLE)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "valid (AWSTemplateFormatVersion 2010-09-09)" in result.output


def test_cfn_example_applies_switches_tier_and_destroys(tmp_path: Path) -> None:
    runner = CliRunner()
    state = str(tmp_path / "state.db")

    def converge(*args: str) -> Any:
        result = runner.invoke(main, [*args, "--state", state], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    def apply(*parameters: str) -> dict[str, Any]:
        document = json.loads(converge("apply", str(EXAMPLE), *parameters, "-f", "json").stdout)
        assert document["stack_status"].endswith("_COMPLETE"), document
        return {item["output_key"]: item["output_value"] for item in document["outputs"]}

    def settings(path: Path) -> dict[str, str]:
        pairs = (line.split(" = ", 1) for line in path.read_text().splitlines())
        return dict(pairs)

    previous = Path.cwd()
    os.chdir(tmp_path)
    try:
        first = apply()
        config = tmp_path / "site" / "app.conf"
        assert first == {"ConfigFile": str(config), "SecretLength": 12, "Backup": None}
        dev = settings(config)
        assert dev["stack"] == "cfn" and dev["log_level"] == "debug"
        assert dev["owner"] == "alice" and dev["mode"] == "relaxed"
        assert len(dev["secret"]) == 12
        assert oct(config.stat().st_mode & 0o777) == "0o600"
        assert not (tmp_path / "site" / "app.conf.bak").exists()

        second = apply("-P", "Tier=prod", "-P", "Owners=carol,dave")
        backup = tmp_path / "site" / "app.conf.bak"
        assert second == {"ConfigFile": str(config), "SecretLength": 32, "Backup": str(backup)}
        prod = settings(config)
        assert prod["log_level"] == "warning" and prod["mode"] == "strict"
        assert prod["owner"] == "carol" and len(prod["secret"]) == 32
        assert backup.read_text() == f"# backup of {config}\n"

        third = apply("-P", "Tier=dev")
        assert third["Backup"] is None and not backup.exists()

        converge("destroy", "cfn", "-y")
        assert not (tmp_path / "site").exists()
    finally:
        os.chdir(previous)
