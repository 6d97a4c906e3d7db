"""Benchmark: a long chaos run over PostgreSQL and RabbitMQ.

A stack of ``Local::File``s, waiting ``OS::Heat::TestResource``s (in layers) and
``OS::Heat::None``s (``tests/support/chaos.py``) is created, updated again and again (every
update changes every value in place and replaces a third of the test resources and half
of the files), every third update failing on purpose and rolled back, then destroyed —
all through the real command line, while a random worker or engine process is SIGKILLed
every few seconds (workers restarted by ``serve --workers``, engines here). After each
operation reality and the rows are compared with the template: files on disk and their
content, the test world's things, one row per resource.

Reported: operations completed as expected, processes killed, resources leaked and
duplicated (target 0), and the time for the work a killed process held to move on (target
under 2 x the heartbeat timeout, 60 s). Needs PostgreSQL (``CONVERGE_TEST_PG``, default
127.0.0.1:5432) and RabbitMQ (``CONVERGE_TEST_AMQP``, default 127.0.0.1:5672).
Run: ``python bench/bench_chaos.py [--operations 10] [--interval 2] [--scale 2] [--no-write]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from subprocess import CompletedProcess

from _report import provenance, write_section

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.amqp import delete_namespace
from support.chaos import (
    NO_WORKER,
    Generation,
    Killer,
    Shape,
    apply,
    differences,
    leftovers,
    start_cluster,
)
from support.databases import fresh_database
from support.distributed import Deployment, Serve

PG = os.environ.get("CONVERGE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
AMQP = os.environ.get("CONVERGE_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
HEARTBEAT_TIMEOUT = 30.0  # EngineSettings.engine_stale_after
STACK = "chaos"


def plan(operations: int) -> list[tuple[str, Generation, Generation, str]]:
    """(what, generation applied, generation expected after, stack status) per operation."""
    steps = [("create", Generation(1), Generation(1), "CREATE_COMPLETE")]
    standing = Generation(1)
    for number in range(2, operations + 1):
        if number % 3 == 0:
            steps.append(
                (
                    "failed update, rolled back",
                    Generation(number, fail=True),
                    standing,
                    "ROLLBACK_COMPLETE",
                )
            )
        else:
            standing = Generation(number)
            steps.append(("update with replacements", standing, standing, "UPDATE_COMPLETE"))
    return steps


def run(
    deployment: Deployment, shape: Shape, operations: int, interval: float
) -> dict[str, object]:
    start_cluster(deployment)
    rows: list[str] = []
    problems: list[str] = []
    completed = 0
    started = time.monotonic()

    def record(
        what: str, began: float, done: CompletedProcess[str], expected: int, found: list[str]
    ) -> None:
        nonlocal completed
        ok = done.returncode == expected and not found
        completed += ok
        problems.extend(found)
        failure = (found[:1] or [f"exit {done.returncode}: {done.stderr.strip()[-200:]}"])[0]
        rows.append(
            f"| {what} | {time.monotonic() - began:.1f} | {'yes' if ok else 'NO: ' + failure} |"
        )
        print(rows[-1], f"(ended {time.strftime('%H:%M:%S')})", flush=True)

    with Killer(deployment, interval=interval, seed=10) as killer:
        for what, applied, expected, status in plan(operations):
            began = time.monotonic()
            done = apply(
                deployment, STACK, shape, applied, *(["--rollback"] if applied.fail else [])
            )
            found = differences(deployment, STACK, shape, expected, status)
            record(what, began, done, 1 if applied.fail else 0, found)
        began = time.monotonic()
        while (
            done := deployment.converge("destroy", STACK, "--yes", timeout=600)
        ).returncode == NO_WORKER:
            time.sleep(1)  # every worker killed and waiting out its restart pause
        record("destroy", began, done, 0, leftovers(deployment))
    return {
        "rows": rows,
        "problems": problems,
        "completed": completed,
        "operations": operations + 1,
        "kills": killer.kills,
        "seconds": time.monotonic() - started,
    }


def report(result: dict[str, object], shape: Shape, interval: float, load: float) -> list[str]:
    kills = result["kills"]
    assert isinstance(kills, list)
    problems = result["problems"]
    assert isinstance(problems, list)
    leaked = [p for p in problems if "leaked" in p or "no row holds it" in p]
    duplicated = [p for p in problems if " rows for " in p and not p.startswith("0 ")]
    held = [kill for kill in kills if kill.claimed]
    resumed = [kill.resumed_after for kill in held if kill.resumed_after is not None]
    by_role = {role: sum(kill.role == role for kill in kills) for role in ("worker", "engine")}
    worst = max(resumed, default=0.0)
    lines = [
        "## Chaos run (`bench/bench_chaos.py`)",
        "",
        f"A stack of {shape.size} resources ({shape.files} `Local::File`, {shape.tests} "
        f"`OS::Heat::TestResource` waiting {shape.wait_secs:g} s in {shape.depth} layers, "
        f"{shape.nones} `OS::Heat::None`) over PostgreSQL and RabbitMQ, driven by the "
        "command line; 2 engine processes (`serve --roles engine`) and 3 worker processes "
        "(`serve --roles worker --workers 2` and `--workers 1`) on this machine, while a "
        f"random worker or engine process is SIGKILLed every {interval:g} s (±50%). Each "
        "update changes every value and replaces a third of the test resources and half of "
        "the files; every third one fails on purpose and is rolled back.",
        "",
        "| operation | seconds | reality and rows equal the template |",
        "|---|---|---|",
        *result["rows"],  # type: ignore[misc]
        "",
        f"- operations completed as expected: {result['completed']} of {result['operations']} "
        f"in {result['seconds']:.0f} s",
        f"- processes killed: {len(kills)} ({by_role['worker']} workers, {by_role['engine']} engines)",
        f"- resources leaked: {len(leaked)}, duplicated: {len(duplicated)} (target 0)"
        + (
            f"; other differences: {len(problems) - len(leaked) - len(duplicated)}"
            if len(problems) > len(leaked) + len(duplicated)
            else ""
        ),
        f"- time for the work a killed process held to move on ({len(held)} kills held "
        f"claimed rows; {len(held) - len(resumed)} never did): median "
        f"{statistics.median(resumed) if resumed else 0:.1f} s, max {worst:.1f} s "
        f"(target under 2 x the heartbeat timeout, {2 * HEARTBEAT_TIMEOUT:g} s: "
        f"{'met' if worst < 2 * HEARTBEAT_TIMEOUT and len(resumed) == len(held) else 'NOT met'})",
        f"- load average when the run began (the machine is shared): {load:.2f}",
        *provenance(),
    ]
    if problems:
        lines += ["", "First differences found:", "", *(f"- {p}" for p in problems[:10])]
    return lines


def _started(serve: Serve, timeout: float = 60.0) -> None:
    """Once ``serve`` said it runs: an engine the killer restarted at the end may still be
    starting, and a SIGTERM before its handler is installed ends it by the signal (as
    any process's), which ``Serve.stop`` takes for an unclean stop."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and serve.process.poll() is None:
        if "converge serve: roles" in serve.log.read_text(errors="replace"):
            return
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operations", type=int, default=10, help="create and updates")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between kills")
    parser.add_argument("--scale", type=int, default=2, help="times the test's 500 resources")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--keep-logs", type=Path, default=None, help="copy the serve processes' logs here"
    )
    args = parser.parse_args()
    shape = Shape(
        files=150 * args.scale,
        tests=150 * args.scale,
        nones=200 * args.scale,
        wait_secs=1.0,
        depth=5,
    )
    load = os.getloadavg()[0]
    namespace = f"converge-bench-{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory() as tmp, fresh_database(PG) as database:
        deployment = Deployment(database, AMQP, namespace, Path(tmp))
        try:
            result = run(deployment, shape, args.operations, args.interval)
            for serve in deployment.serving:
                _started(serve)
                try:
                    serve.stop()
                except AssertionError as exc:  # reported with the figures, not lost with them
                    result["problems"].append(str(exc).splitlines()[0])  # type: ignore[attr-defined]
        finally:
            deployment.stop_all()
            if args.keep_logs is not None:
                args.keep_logs.mkdir(parents=True, exist_ok=True)
                for log in Path(tmp).glob("*.log"):
                    shutil.copy(log, args.keep_logs / log.name)
            asyncio.run(delete_namespace(AMQP, namespace, hosts=(socket.gethostname(),)))
    lines = report(result, shape, args.interval, load)
    print("\n".join(lines))
    if not args.no_write:
        write_section("bench_chaos", lines)


if __name__ == "__main__":
    main()
