"""Benchmark: fuzz ``validate`` with thousands of mutated templates; records crashes, hangs
and the slowest case in docs/benchmarks.md.

Cases come from ``tests/support/fuzz.py`` (seeds from ``examples/`` and the test corpora,
mutated by a seeded random sequence), run one after the other in a worker process that
is killed and replaced when a case takes longer than ``--hang`` seconds: a hang is
counted, never waited for. A crash is any exception other than ``TemplateError``.
Run: ``python bench/bench_fuzz.py [--cases N] [--start S] [--hang SECONDS] [--no-record]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from _report import provenance, write_section

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.fuzz import describe, load_seeds, make_case, run_case


def _case_of(index: int, seeds: list[Any]) -> Any:
    return make_case(seeds[index % len(seeds)], index, 1 + index % 6)


def _worker(connection: Connection) -> None:
    seeds = load_seeds()
    run_case(make_case(seeds[0], 0, 0))  # imports and caches: not part of any case's time
    connection.send("ready")
    while True:
        index = connection.recv()
        if index is None:
            return
        outcome = run_case(_case_of(index, seeds))
        connection.send((outcome.kind, outcome.seconds, outcome.detail))


class _Runner:
    """One worker process at a time; replaced when a case hangs."""

    def __init__(self) -> None:
        self.context = multiprocessing.get_context("spawn")
        self._start()

    def _start(self) -> None:
        self.connection, child = self.context.Pipe()
        self.process = self.context.Process(target=_worker, args=(child,), daemon=True)
        self.process.start()
        if not self.connection.poll(300) or self.connection.recv() != "ready":
            raise RuntimeError("the fuzz worker did not start")

    def run(self, index: int, hang: float) -> tuple[str, float, str]:
        started = time.perf_counter()
        self.connection.send(index)
        if self.connection.poll(hang):
            kind, seconds, detail = self.connection.recv()
            return kind, seconds, detail
        self.process.kill()
        self.process.join()
        self._start()
        return "hang", time.perf_counter() - started, ""

    def close(self) -> None:
        self.connection.send(None)
        self.process.join(timeout=10)


ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "examples" / "hello.yaml"
MANY = sorted(str(path) for path in (ROOT / "examples").glob("*.yaml") if ".env." not in path.name)


def _median_seconds(command: list[str], runs: int) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system) of the process."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        subprocess.run(command, capture_output=True, check=False)
        walls.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def _row(what: str, figures: tuple[float, float]) -> str:
    return f"| {what} | {figures[0] * 1000:.0f} ms | {figures[1] * 1000:.0f} ms |"


def measure_start(runs: int) -> list[str]:
    """Wall time of ``converge validate`` processes: one small template, and the examples
    one per process against all in one process. Bytecode is compiled first (a user's
    installed package has it; a source checkout with PYTHONDONTWRITEBYTECODE would not)."""
    env_python = sys.executable
    subprocess.run([env_python, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    converge = [str(Path(env_python).parent / "converge")]
    bare = _median_seconds([env_python, "-c", "pass"], runs)
    small = _median_seconds([*converge, "validate", str(SMALL)], runs)
    per_file = [_median_seconds([*converge, "validate", path], max(3, runs // 4)) for path in MANY]
    each = (sum(wall for wall, _ in per_file), sum(cpu for _, cpu in per_file))
    together = _median_seconds([*converge, "validate", *MANY], max(3, runs // 4))
    load = os.getloadavg()[0]
    return [
        "",
        f"`converge validate` start (median of {runs} runs, bytecode compiled, load average "
        f"{load:.1f} on {os.cpu_count()} CPUs while measuring):",
        "",
        "| what | wall time | CPU time |",
        "| --- | ---: | ---: |",
        _row("`python -c pass`", bare),
        _row("`converge validate examples/hello.yaml`", small),
        _row(f"the {len(MANY)} examples, one process each", each),
        _row(f"the {len(MANY)} examples in one `converge validate`", together),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--start", type=int, default=100_000, help="first random seed")
    parser.add_argument("--hang", type=float, default=5.0, help="seconds that count as a hang")
    parser.add_argument("--start-runs", type=int, default=20, help="runs per start figure")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    seeds = load_seeds()
    runner = _Runner()
    kinds: Counter[str] = Counter()
    times: list[float] = []
    crashes: dict[str, int] = {}
    slowest = (0.0, args.start)
    began = time.perf_counter()
    for index in range(args.start, args.start + args.cases):
        kind, seconds, detail = runner.run(index, args.hang)
        kinds[kind] += 1
        if kind == "crash":
            signature = detail.strip().splitlines()[-1][:120]
            if signature not in crashes:
                print(f"crash: {describe(_case_of(index, seeds))}\n{detail}", file=sys.stderr)
            crashes[signature] = crashes.get(signature, 0) + 1
        if kind == "hang":
            print(f"hang: {describe(_case_of(index, seeds))}", file=sys.stderr)
        if kind != "hang":
            times.append(seconds)
            slowest = max(slowest, (seconds, index))
    runner.close()
    elapsed = time.perf_counter() - began

    slow_case = _case_of(slowest[1], seeds)
    quantiles = statistics.quantiles(times, n=100, method="inclusive")
    lines = [
        "## Fuzzing `validate` (`bench/bench_fuzz.py`)",
        "",
        f"{args.cases} cases: {len(seeds)} seed templates (`examples/`, `tests/corpus/`, "
        "`tests/fuzz/seeds/`) with 1 to 6 mutations each (values that broke parsers before, "
        "deleted, copied and renamed nodes, wrapped in intrinsic functions, other versions, "
        "edited text), validated as `converge validate` does (odd seeds as `plan` and "
        "`apply` do: values required, then every property and output evaluated with made-up "
        "resource data). A crash is any exception but "
        f"a `TemplateError`; a hang is a case still running after {args.hang:g} s (the worker "
        "is killed and replaced).",
        "",
        "| cases | valid | clear errors | crashes | hangs | median | p99 | slowest |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {args.cases} | {kinds['valid']} | {kinds['error']} | {kinds['crash']} | "
        f"{kinds['hang']} | {statistics.median(times) * 1000:.1f} ms | "
        f"{quantiles[98] * 1000:.0f} ms | {slowest[0] * 1000:.0f} ms |",
        "",
        f"- slowest case: {slow_case.seed}, random seed {slowest[1]} "
        f"({'; '.join(slow_case.mutations)[:200]})",
        f"- random seeds {args.start} to {args.start + args.cases - 1}; whole run {elapsed:.0f} s",
        *(f"- crash ({count} times): `{signature}`" for signature, count in crashes.items()),
        *measure_start(args.start_runs),
        "",
        *provenance(),
    ]
    print("\n".join(lines))
    if not args.no_record:
        write_section("fuzz", lines)


if __name__ == "__main__":
    main()
