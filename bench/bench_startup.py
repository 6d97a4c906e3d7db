"""Benchmark: CPU time of ``converge validate`` on a small template (process start included).

A CI job or an editor validates one template per call, so the start of the process is
most of the cost. Measured as the child's user + system CPU time (not wall time: the
machine is shared), with Python's bytecode already cached, as every run after the first
finds it. Two references: a bare ``python -c pass`` and ``import click``.
Run: ``python bench/bench_startup.py [--rounds N] [--no-record]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import converge as converge_package
from _report import provenance, write_section

TARGET_MS = 150.0
SMALL = """\
heat_template_version: 2021-04-16
parameters:
  name: {type: string, default: world}
resources:
  greeting: {type: OS::Heat::Value, properties: {value: {str_replace: {template: hi $n, params: {$n: {get_param: name}}}}}}
outputs:
  said: {value: {get_attr: [greeting, value]}}
"""


def cpu_ms(
    command: list[str], rounds: int, environment: dict[str, str] | None = None
) -> dict[str, float]:
    """Median and lowest CPU milliseconds of ``command`` over ``rounds`` runs (one unmeasured
    run first writes the bytecode caches, unless ``environment`` forbids it)."""
    if environment is None:
        environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, check=True)
    samples = []
    for _ in range(rounds):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        used = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        samples.append(used * 1000)
    return {"median": statistics.median(samples), "min": min(samples)}


def measure(rounds: int) -> dict[str, dict[str, float]]:
    converge = str(Path(sys.executable).with_name("converge"))
    with tempfile.TemporaryDirectory() as scratch:
        template = Path(scratch) / "small.yaml"
        template.write_text(SMALL)
        # A copy of the package without its bytecode, never allowed to write any: every
        # converge module compiled on each run (the dependencies keep theirs).
        shutil.copytree(
            Path(converge_package.__file__).parent,
            Path(scratch) / "converge",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        uncached = {**os.environ, "PYTHONPATH": scratch, "PYTHONDONTWRITEBYTECODE": "1"}
        program = "from converge.cli.main import main; main()"
        return {
            "python -c pass": cpu_ms([sys.executable, "-c", "pass"], rounds),
            "python -c 'import click'": cpu_ms([sys.executable, "-c", "import click"], rounds),
            "converge validate small.yaml": cpu_ms([converge, "validate", str(template)], rounds),
            "the same, converge's bytecode not cached": cpu_ms(
                [sys.executable, "-c", program, "validate", str(template)], rounds, uncached
            ),
        }


def record(figures: dict[str, dict[str, float]], rounds: int, load_average: str) -> None:
    validate = figures["converge validate small.yaml"]["median"]
    met = "met" if validate < TARGET_MS else "**missed**"
    write_section(
        "bench_startup",
        [
            "## CLI start (`bench/bench_startup.py`)",
            "",
            f"CPU time (user + system) of one process, {rounds} runs each (bytecode cached unless said):",
            "",
            "| command | median ms | lowest ms |",
            "|---|---:|---:|",
            *(
                f"| `{name}` | {value['median']:.0f} | {value['min']:.0f} |"
                for name, value in figures.items()
            ),
            "",
            "`validate` imports no engine, store or terminal display, and only the plugin"
            " modules of the types the template uses (the registry imports a type on first"
            " use). The last row is a run that finds no bytecode of converge's and may write"
            " none (PYTHONDONTWRITEBYTECODE=1 with an editable install): every module of"
            " converge is compiled on each run.",
            "",
            *provenance(),
            f"- load average when the run began (the machine is shared): {load_average}",
            f"- target: `validate` under {TARGET_MS:g} ms of CPU, bytecode cached: {met}",
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    load_average = " ".join(f"{value:.2f}" for value in os.getloadavg())
    figures = measure(args.rounds)
    print(json.dumps(figures, indent=2))
    if not args.no_record:
        record(figures, args.rounds, load_average)


if __name__ == "__main__":
    main()
