"""Benchmark: load and prepare a 10,000-resource template; records figures in docs/benchmarks.md.

The template is a tree of dependencies: resource i reads ``get_attr`` of its parent (i // 2),
names its grandparent with ``get_resource`` and ``depends_on`` the resource i // 3, with
OS::Heat::TestResource and OS::Heat::Value from the real plugin registry.
Run: ``python bench/bench_validate.py [--resources N] [--no-record]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import time
from pathlib import Path

from converge.core.template import StackIdentity, load_template, prepare_stack
from converge.resources.registry import default_registry

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench_validate:begin -->", "<!-- bench_validate:end -->"


def make_template(count: int) -> str:
    lines = [
        "heat_template_version: 2021-04-16",
        "parameters:",
        "  prefix: {type: string, default: node}",
        "resources:",
        "  r0:",
        "    type: OS::Heat::TestResource",
        "    properties: {value: {get_param: prefix}}",
    ]
    for i in range(1, count):
        kind = "OS::Heat::Value" if i % 5 == 0 else "OS::Heat::TestResource"
        attribute = "value" if (i // 2) % 5 == 0 and i // 2 else "output"
        lines += [
            f"  r{i}:",
            f"    type: {kind}",
            "    properties:",
            "      value:",
            "        str_replace:",
            "          template: $parent/$grand",
            "          params:",
            f"            $parent: {{get_attr: [r{i // 2}, {attribute}]}}",
            f"            $grand: {{get_resource: r{i // 4}}}",
            f"    depends_on: [r{i // 3}]",
        ]
    last = "value" if (count - 1) % 5 == 0 else "output"
    lines += ["outputs:", "  last:", f"    value: {{get_attr: [r{count - 1}, {last}]}}"]
    return "\n".join(lines) + "\n"


def measure(count: int, rounds: int) -> dict[str, float]:
    text = make_template(count)
    schemas = default_registry()
    identity = StackIdentity("bench", "bench-id", "bench-project")
    json_text = json.dumps(load_template(text, "bench.yaml").data)
    best = {
        "load": float("inf"),
        "prepare": float("inf"),
        "total": float("inf"),
        "load_json": float("inf"),
    }
    for _ in range(rounds):
        start = time.perf_counter()
        template = load_template(text, "bench.yaml")
        loaded = time.perf_counter()
        definition = prepare_stack(template, identity=identity, schemas=schemas)
        done = time.perf_counter()
        definition.graph().topological_order()
        assert len(definition.resources) == count
        best["load"] = min(best["load"], loaded - start)
        best["prepare"] = min(best["prepare"], done - loaded)
        best["total"] = min(best["total"], done - start)
        start = time.perf_counter()
        load_template(json_text, "bench.json")
        best["load_json"] = min(best["load_json"], time.perf_counter() - start)
    best["bytes"] = len(text.encode())
    return best


def _git_head() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "(no commit)"


def record(count: int, figures: dict[str, float]) -> None:
    section = "\n".join(
        [
            BEGIN,
            "## Template validation (`bench/bench_validate.py`)",
            "",
            f"{count} resources ({figures['bytes'] / 1e6:.1f} MB of YAML), best of the rounds:",
            "",
            "| step | seconds |",
            "|---|---|",
            f"| load_template | {figures['load']:.3f} |",
            f"| prepare_stack | {figures['prepare']:.3f} |",
            f"| total | {figures['total']:.3f} |",
            f"| load_template, same template as JSON | {figures['load_json']:.3f} |",
            "",
            f"- machine: `{' '.join(platform.uname())}`, {os.cpu_count()} CPUs",
            f"- date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
            f"- commit: {_git_head()}",
            "- target: under 1 s in total",
            END,
        ]
    )
    text = DOC.read_text() if DOC.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    text = pattern.sub(section, text) if pattern.search(text) else text.rstrip() + "\n\n" + section
    DOC.parent.mkdir(exist_ok=True)
    DOC.write_text(text.rstrip() + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--resources", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    figures = measure(args.resources, args.rounds)
    print(json.dumps({"resources": args.resources, **figures}, indent=2))
    if not args.no_record:
        record(args.resources, figures)


if __name__ == "__main__":
    main()
